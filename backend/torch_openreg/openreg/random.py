"""Per-device random generators (the torch.cuda.random API)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

import torch_openreg._C as _C
from torch_openreg._runtime import DEVICE_TYPE


def _index(device: Any) -> int:
    from torch_openreg.openreg import _device_index

    return _device_index(device)


class _DefaultGenerators:
    """Lazily materialised tuple-like view of the per-device default generators."""

    def __getitem__(self, index: int) -> torch.Generator:
        from torch_openreg.openreg import device_count

        if not 0 <= index < device_count():
            raise IndexError(f"{DEVICE_TYPE} device index {index} out of range")
        return _C._get_default_generator(index)

    def __len__(self) -> int:
        from torch_openreg.openreg import device_count

        return device_count()

    def __iter__(self):  # type: ignore[no-untyped-def]
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()


def get_rng_state(device: Any = DEVICE_TYPE) -> torch.Tensor:
    return default_generators[_index(device)].get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    return [g.get_state() for g in default_generators]


def set_rng_state(new_state: torch.Tensor, device: Any = DEVICE_TYPE) -> None:
    default_generators[_index(device)].set_state(new_state.clone(memory_format=torch.contiguous_format))


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    """Seed the current device's generator."""
    default_generators[_index(None)].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in default_generators:
        g.manual_seed(int(seed))


def seed() -> None:
    """Seed the current device's generator with a non-deterministic number."""
    default_generators[_index(None)].seed()


def seed_all() -> None:
    """Seed every device with the same non-deterministic number."""
    generators = list(default_generators)
    if generators:
        value = generators[0].seed()
        for g in generators[1:]:
            g.manual_seed(value)


def initial_seed() -> int:
    return default_generators[_index(None)].initial_seed()
