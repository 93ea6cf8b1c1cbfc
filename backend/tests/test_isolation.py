"""Device memory is not host memory: a stray host access must crash loudly."""

import signal

import pytest


@pytest.mark.openreg_runtime  # openreg guards device memory; shmreg's is a plain shared mapping
def test_host_read_of_device_memory_segfaults(python):
    r = python("""
        import ctypes, torch, torch_openreg
        x = torch.ones(1024, device="openreg")
        torch.openreg.synchronize()
        print("before", flush=True)
        ctypes.string_at(x.data_ptr(), 8)     # host dereference of a device pointer
        print("after", flush=True)
    """, timeout=180)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    assert r.stdout.split() == ["before"]


@pytest.mark.openreg_runtime  # openreg guards device memory; shmreg's is a plain shared mapping
def test_host_write_of_device_memory_segfaults(python):
    r = python("""
        import ctypes, torch, torch_openreg
        x = torch.zeros(16, device="openreg")
        torch.openreg.synchronize()
        ctypes.memset(x.data_ptr(), 1, 4)
        print("after", flush=True)
    """, timeout=180)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stderr)
    assert "after" not in r.stdout


def test_pinned_host_memory_is_host_accessible(python):
    r = python("""
        import ctypes, torch, torch_openreg
        p = torch.ones(4).pin_memory()
        print(len(ctypes.string_at(p.data_ptr(), 16)))
    """, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "16"


def test_numpy_on_device_tensor_is_a_clean_error(device):
    import pytest
    import torch

    with pytest.raises(TypeError):
        torch.ones(2, device=device).numpy()
