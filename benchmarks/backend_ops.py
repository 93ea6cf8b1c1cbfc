"""Time ratio openreg / CPU for common ops, with the native kernels and with
every op routed to the CPU fallback, measured in one run.

    .venv/bin/python benchmarks/backend_ops.py [--rounds 15] [--calls 10] [--cpu-threads N] [--json]

Target: native <= 1.5x CPU. Each timing is the best of several rounds of a
batch of calls, ending with a device synchronize (kernels are asynchronous).
The three variants of an op are measured in interleaved rounds, so load from
other processes on the machine hits them alike; best-of filters the rest.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch
import torch_openreg

N = 1 << 20  # 1M elements


def _inputs(device: str) -> dict[str, tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(N, generator=g)
    b = torch.randn(N, generator=g)
    m1 = torch.randn(512, 512, generator=g)
    m2 = torch.randn(512, 512, generator=g)
    s = torch.randn(1024, 1024, generator=g)
    return {
        "add": (a.to(device), b.to(device)),
        "mul": (a.to(device), b.to(device)),
        "sum": (a.to(device),),
        "mm": (m1.to(device), m2.to(device)),
        "softmax": (s.to(device),),
    }


OPS: dict[str, tuple[str, Callable[..., torch.Tensor]]] = {
    "add": ("1M float32", torch.add),
    "mul": ("1M float32", torch.mul),
    "sum": ("1M float32 -> scalar", torch.sum),
    "mm": ("512x512 @ 512x512", torch.mm),
    "softmax": ("1024x1024, dim=-1", lambda x: torch.softmax(x, -1)),
}


def _sync(device: str) -> None:
    if device == "openreg":
        torch.openreg.synchronize()


def time_batch(fn: Callable[..., torch.Tensor], args: tuple[torch.Tensor, ...], device: str,
               calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    _sync(device)
    return (time.perf_counter() - start) / calls


def set_native(enabled: bool) -> None:
    torch_openreg._C._set_native_kernels_enabled(enabled)


def measure(fn: Callable[..., torch.Tensor], cpu_args: tuple[torch.Tensor, ...],
            dev_args: tuple[torch.Tensor, ...], rounds: int, calls: int) -> dict[str, float]:
    variants = {
        "cpu": (cpu_args, "cpu", True),
        "native": (dev_args, "openreg", True),
        "fallback": (dev_args, "openreg", False),
    }
    best = dict.fromkeys(variants, float("inf"))
    try:
        for _ in range(3):  # warm up caches, the allocator and thread pools
            for args, device, native in variants.values():
                set_native(native)
                time_batch(fn, args, device, 1)
        for _ in range(rounds):
            for name, (args, device, native) in variants.items():
                set_native(native)
                best[name] = min(best[name], time_batch(fn, args, device, calls))
    finally:
        set_native(True)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--cpu-threads", type=int, default=None,
                        help="torch.set_num_threads for the CPU baseline (default: torch's own, all cores); "
                             "1 gives steadier numbers on a loaded machine")
    args = parser.parse_args()
    if args.cpu_threads is not None:
        torch.set_num_threads(args.cpu_threads)

    cpu_inputs, dev_inputs = _inputs("cpu"), _inputs("openreg")
    results = {}
    for name, (shape, fn) in OPS.items():
        best = measure(fn, cpu_inputs[name], dev_inputs[name], args.rounds, args.calls)
        cpu, native, fallback = best["cpu"], best["native"], best["fallback"]
        results[name] = {"shape": shape, "cpu_ms": cpu * 1e3, "native_ms": native * 1e3,
                         "fallback_ms": fallback * 1e3, "native_ratio": native / cpu,
                         "fallback_ratio": fallback / cpu}

    if args.json:
        print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "ops": results}))
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, best of {args.rounds} x {args.calls} calls")
    print(f"{'op':<8} {'shape':<22} {'cpu ms':>8} {'native ms':>10} {'native/cpu':>11} {'fallback ms':>12} {'fallback/cpu':>13}")
    for name, r in results.items():
        flag = "" if r["native_ratio"] <= 1.5 else "  (> 1.5x target)"
        print(f"{name:<8} {r['shape']:<22} {r['cpu_ms']:8.3f} {r['native_ms']:10.3f} {r['native_ratio']:10.2f}x"
              f" {r['fallback_ms']:12.3f} {r['fallback_ratio']:12.2f}x{flag}")


if __name__ == "__main__":
    main()
