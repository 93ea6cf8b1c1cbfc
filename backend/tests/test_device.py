"""Device enumeration, the current device and the device guard."""

import os

import pytest
import torch
from conftest import DEVICE_MODULE, DEVICE_TYPE


def test_device_count_matches_runtime_default(python):
    assert DEVICE_MODULE.is_available()
    expected = int(os.environ.get("OPENREG_DEVICE_COUNT", "2"))
    assert DEVICE_MODULE.device_count() == expected


def test_device_count_follows_env_in_fresh_process(python):
    # A process that has not used the device yet: since the runtime reads the variable at
    # its first query, a fork of the preloaded interpreter is one (test_preloaded.py).
    r = python("import torch, torch_openreg; print(torch.openreg.device_count())",
               env={"OPENREG_DEVICE_COUNT": "3"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3"


def test_zero_devices_means_unavailable(python):
    r = python(
        "import torch, torch_openreg; print(torch.openreg.is_available(), torch.openreg.device_count())",
        env={"OPENREG_DEVICE_COUNT": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "0"]


def test_set_device_changes_default_placement(two_devices):
    DEVICE_MODULE.set_device(1)
    assert DEVICE_MODULE.current_device() == 1
    t = torch.empty(2, device=DEVICE_TYPE)
    assert t.device == torch.device(DEVICE_TYPE, 1)


def test_device_context_manager_restores(two_devices):
    assert DEVICE_MODULE.current_device() == 0
    with DEVICE_MODULE.device(1):
        assert DEVICE_MODULE.current_device() == 1
        assert torch.ones(1, device=DEVICE_TYPE).device.index == 1
    assert DEVICE_MODULE.current_device() == 0


def test_generic_device_guard_uses_openreg_guard(two_devices):
    # torch.device as a context manager and ops on device 1 go through the
    # registered DeviceGuardImpl: the current device is restored afterwards.
    x = torch.ones(3, device=f"{DEVICE_TYPE}:1")
    y = x + x
    assert y.device.index == 1
    assert DEVICE_MODULE.current_device() == 0
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))


def test_tensor_methods_report_device(device):
    t = torch.zeros(2, device=device)
    assert getattr(t, f"is_{DEVICE_TYPE}")
    assert t.device.type == DEVICE_TYPE
    assert t.get_device() == 0
    assert not t.is_cpu


def test_synchronize_waits_for_queued_work(device):
    x = torch.randn(256, 256, device=device)
    for _ in range(5):
        x = x * 1.0001
    DEVICE_MODULE.synchronize()
    assert DEVICE_MODULE.current_stream().query()


def test_device_name_mentions_index():
    assert "0" in DEVICE_MODULE.get_device_name(0)
