"""all_reduce bandwidth of occl (openreg tensors, shared memory) vs gloo (CPU
tensors, TCP loopback), 2 processes on this host, 1 MB and 64 MB float32.

Target: occl >= 0.8x gloo. Both backends live in one process group
("cpu:gloo,openreg:occl") and are measured in interleaved rounds, so load
from other processes hits them alike; each figure is the best round. A round
is a batch of all_reduce calls ended by a barrier and, for openreg, a device
synchronize (the calls only queue work on the device). Bandwidth is the
tensor's bytes over the time per call ("algbw", as nccl-tests).

    .venv/bin/python benchmarks/backend_c10d.py [--rounds 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch_openreg  # noqa: F401  (registers occl)

SIZES = {"1 MB": 1 << 20, "64 MB": 64 << 20}
TARGET = 0.8


def _seconds_per_call(tensor: torch.Tensor, calls: int) -> float:
    dist.barrier()
    start = time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(tensor)
    if tensor.device.type == "openreg":
        torch.openreg.synchronize()
    dist.barrier()
    return (time.perf_counter() - start) / calls


def _worker(rank: int, store: str, rounds: int, out: str) -> None:
    dist.init_process_group("cpu:gloo,openreg:occl", init_method=f"file://{store}", rank=rank,
                            world_size=2)
    torch.openreg.set_device(rank % torch.openreg.device_count())
    results: dict[str, dict[str, float]] = {}
    for label, nbytes in SIZES.items():
        calls = max(3, (256 << 20) // nbytes)  # about 256 MB moved per round
        tensors = {
            "gloo": torch.ones(nbytes // 4),
            "occl": torch.ones(nbytes // 4, device="openreg"),
        }
        best = dict.fromkeys(tensors, float("inf"))
        for t in tensors.values():
            _seconds_per_call(t, 2)  # warm up: connections, rings, allocator
        for _ in range(rounds):
            for name, t in tensors.items():
                best[name] = min(best[name], _seconds_per_call(t, calls))
        results[label] = {f"{name}_gbps": nbytes / s / 1e9 for name, s in best.items()}
        results[label]["ratio"] = results[label]["occl_gbps"] / results[label]["gloo_gbps"]
    if rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        mp.spawn(_worker, args=(os.path.join(tmp, "store"), args.rounds, out), nprocs=2, join=True)
        with open(out) as f:
            results = json.load(f)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"all_reduce, 2 processes on {socket.gethostname()}, best of {args.rounds} rounds")
    for label, r in results.items():
        verdict = "ok" if r["ratio"] >= TARGET else f"BELOW target {TARGET}"
        print(f"  {label:>6}: occl {r['occl_gbps']:6.2f} GB/s   gloo {r['gloo_gbps']:6.2f} GB/s"
              f"   occl/gloo {r['ratio']:.2f}  ({verdict})")


if __name__ == "__main__":
    main()
