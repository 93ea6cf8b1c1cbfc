"""Time ratio openreg / CPU for common ops, with the native kernels and with
every op routed to the CPU fallback, measured in one run.

    .venv/bin/python benchmarks/backend_ops.py [--rounds 15] [--min-calls 10]
        [--min-batch-ms 2] [--cpu-threads N] [--json]

Target: native <= 1.5x CPU. Each timing is the best of several rounds of a
batch of calls, ending with a device synchronize (kernels are asynchronous).

- Batches: at least --min-calls calls and, by the CPU's time per call, at
  least --min-batch-ms, the same count for all three variants of an op. One
  synchronize costs a fixed 25-100 us on a virtual machine (it closes the
  device's memory window: an mprotect and a TLB shootdown that may have to
  wake an idle vCPU); batches of equal duration give it equal weight for a
  35 us reduction and a 0.8 ms matmul. The launch+sync latency of a tiny op
  is printed too, so that cost is in view rather than hidden.
- Interleaving: the three variants of an op are measured in interleaved
  rounds, so load from other processes hits them alike; best-of filters
  the rest.
- Settling: before each timed batch a variant runs untimed for SETTLE_S.
  The emulated device shares the machine's cores with torch's OpenMP pool,
  whose idle threads spin for milliseconds after each CPU op (libgomp's
  spin count times PAUSE on recent Xeons) and would take one of two cores
  from a device batch started right after the CPU one.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable

import torch
import torch_openreg

N = 1 << 20  # 1M elements
SETTLE_S = 0.02


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


def settle(fn: Callable[..., torch.Tensor], args: tuple[torch.Tensor, ...], device: str) -> None:
    end = time.perf_counter() + SETTLE_S
    while time.perf_counter() < end:
        time_batch(fn, args, device, 1)


def batch_calls(fn: Callable[..., torch.Tensor], cpu_args: tuple[torch.Tensor, ...], min_calls: int,
                min_batch_s: float) -> int:
    per_call = min(time_batch(fn, cpu_args, "cpu", min_calls) for _ in range(3))
    return max(min_calls, math.ceil(min_batch_s / per_call))


def launch_sync_latency(rounds: int = 200) -> float:
    """Seconds from launching a 16-element add to the end of the synchronize."""
    x = torch.ones(16, device="openreg")
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        torch.add(x, x)
        torch.openreg.synchronize()
        best = min(best, time.perf_counter() - start)
    return best


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
                settle(fn, args, device)
                best[name] = min(best[name], time_batch(fn, args, device, calls))
    finally:
        set_native(True)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--min-calls", type=int, default=10)
    parser.add_argument("--min-batch-ms", type=float, default=2.0)
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
        calls = batch_calls(fn, cpu_inputs[name], args.min_calls, args.min_batch_ms / 1e3)
        best = measure(fn, cpu_inputs[name], dev_inputs[name], args.rounds, calls)
        cpu, native, fallback = best["cpu"], best["native"], best["fallback"]
        results[name] = {"shape": shape, "cpu_ms": cpu * 1e3, "native_ms": native * 1e3,
                         "fallback_ms": fallback * 1e3, "native_ratio": native / cpu,
                         "fallback_ratio": fallback / cpu, "calls_per_batch": calls}
    latency_us = launch_sync_latency() * 1e6

    if args.json:
        print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                          "launch_sync_latency_us": latency_us, "ops": results}))
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, best of {args.rounds} batches"
          f" of >= {args.min_calls} calls and >= {args.min_batch_ms:g} ms")
    print(f"{'op':<8} {'shape':<22} {'calls':>5} {'cpu ms':>8} {'native ms':>10} {'native/cpu':>11}"
          f" {'fallback ms':>12} {'fallback/cpu':>13}")
    for name, r in results.items():
        flag = "" if r["native_ratio"] <= 1.5 else "  (> 1.5x target)"
        print(f"{name:<8} {r['shape']:<22} {r['calls_per_batch']:5d} {r['cpu_ms']:8.3f} {r['native_ms']:10.3f} {r['native_ratio']:10.2f}x"
              f" {r['fallback_ms']:12.3f} {r['fallback_ratio']:12.2f}x{flag}")
    print(f"launch + synchronize of a 16-element add: {latency_us:.1f} us")


if __name__ == "__main__":
    main()
