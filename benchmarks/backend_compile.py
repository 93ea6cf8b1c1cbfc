"""torch.compile on openreg: compiled vs eager on openreg, and compiled openreg
vs compiled CPU, for an MLP and a small transformer block (inference).

Target: compiled openreg <= 1.5x compiled CPU. Prints ratios (medians of
batches of calls, each batch ended by a device synchronize).

    .venv/bin/python benchmarks/backend_compile.py
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable

import torch
import torch_openreg  # noqa: F401


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 512),
                               torch.nn.LayerNorm(512), torch.nn.ReLU(), torch.nn.Linear(512, 64)).eval()


def block() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, dropout=0.0,
                                            batch_first=True).eval()


def sync(device: str) -> None:
    if device == "openreg":
        torch.openreg.synchronize()


def seconds_per_call(fn: Callable[[], object], device: str, batch: int = 20, repeats: int = 9) -> float:
    for _ in range(3):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        sync(device)
        times.append((time.perf_counter() - start) / batch)
    return statistics.median(times)


def measure(name: str, model: torch.nn.Module, x: torch.Tensor) -> None:
    results = {}
    for device in ("cpu", "openreg"):
        m = copy.deepcopy(model).to(device)
        xd = x.to(device)
        compiled = torch.compile(m)
        with torch.no_grad():
            torch.testing.assert_close(compiled(xd).cpu(), model(x), rtol=1e-3, atol=1e-3)
            results[(device, "eager")] = seconds_per_call(lambda m=m, xd=xd: m(xd), device)
            results[(device, "compiled")] = seconds_per_call(lambda c=compiled, xd=xd: c(xd), device)
    print(f"{name}: eager cpu {results['cpu', 'eager'] * 1e6:.0f} us, eager openreg "
          f"{results['openreg', 'eager'] * 1e6:.0f} us, compiled cpu {results['cpu', 'compiled'] * 1e6:.0f} us, "
          f"compiled openreg {results['openreg', 'compiled'] * 1e6:.0f} us")
    print(f"  compiled/eager on openreg: {results['openreg', 'compiled'] / results['openreg', 'eager']:.2f}")
    ratio = results['openreg', 'compiled'] / results['cpu', 'compiled']
    print(f"  compiled openreg / compiled cpu: {ratio:.2f} (target <= 1.5)")


def main() -> None:
    measure("mlp (64x256)", mlp(), torch.randn(64, 256))
    measure("transformer block (8x32x128)", block(), torch.randn(8, 32, 128))


if __name__ == "__main__":
    main()
