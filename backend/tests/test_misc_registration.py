"""Registration plumbing: backend rename, device module, generated methods,
serialization with backend metadata, pickling, fork poisoning."""

import io
import pickle
import warnings

import pytest
import torch

import torch_openreg._C as _C
from conftest import DEVICE_MODULE, DEVICE_TYPE


def test_backend_is_renamed_and_module_registered():
    assert torch._C._get_privateuse1_backend_name() == DEVICE_TYPE
    assert torch.device(f"{DEVICE_TYPE}:1").type == DEVICE_TYPE
    assert DEVICE_MODULE.__name__ == "torch_openreg.openreg"
    assert torch._utils._get_device_module(DEVICE_TYPE) is DEVICE_MODULE


def test_generated_tensor_methods(device):
    cpu = torch.arange(4.0)
    # The generated names follow the device: .openreg()/.is_openreg, or .shmreg()/.is_shmreg.
    t = getattr(cpu, DEVICE_TYPE)()
    assert getattr(t, f"is_{DEVICE_TYPE}") and t.device == device
    assert not getattr(cpu, f"is_{DEVICE_TYPE}")
    assert torch.equal(t.cpu(), cpu)


def test_generated_module_methods(device):
    m = torch.nn.Linear(3, 2)
    getattr(m, DEVICE_TYPE)()
    assert all(p.device == device for p in m.parameters())


def test_generated_storage_methods(device):
    s = getattr(torch.arange(3.0).untyped_storage(), DEVICE_TYPE)()
    assert getattr(s, f"is_{DEVICE_TYPE}") and s.device == device
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage is deprecated upstream
        ts = getattr(torch.arange(3.0).storage(), DEVICE_TYPE)()
        assert getattr(ts, f"is_{DEVICE_TYPE}")


def _roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def test_save_load_keeps_device_and_values(device):
    t = torch.randn(4, 5).to(device)
    back = _roundtrip(t)
    assert back.device == device
    assert torch.equal(back.cpu(), t.cpu())


def test_save_load_with_map_location(two_devices):
    t = torch.randn(3).to(f"{DEVICE_TYPE}:1")
    assert _roundtrip(t, map_location="cpu").device.type == "cpu"
    moved = _roundtrip(t, map_location=f"{DEVICE_TYPE}:0")
    assert moved.device == torch.device(f"{DEVICE_TYPE}:0")
    assert torch.equal(moved.cpu(), t.cpu())
    to_dev = _roundtrip(t.cpu(), map_location=f"{DEVICE_TYPE}:1")
    assert to_dev.device == torch.device(f"{DEVICE_TYPE}:1")


def test_save_load_views_share_storage(device):
    base = torch.arange(10.0).to(device)
    a, b = _roundtrip([base[2:5], base])
    a.fill_(0)
    assert b.cpu()[2:5].eq(0).all()


def test_backend_meta_survives_serialization(device):
    t = torch.ones(3, device=device)
    _C._set_nz_format(t, True)
    assert _C._get_nz_format(t)
    back = _roundtrip(t)
    assert _C._get_nz_format(back)
    plain = _roundtrip(torch.ones(3, device=device))
    assert not _C._get_nz_format(plain)


def test_state_dict_roundtrip(device):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).to(DEVICE_TYPE)
    sd = _roundtrip(model.state_dict())
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).to(DEVICE_TYPE)
    fresh.load_state_dict(sd)
    for p, q in zip(model.parameters(), fresh.parameters()):
        assert torch.equal(p.detach().cpu(), q.detach().cpu())


def test_pickle_roundtrip(device):
    t = torch.randn(2, 3).to(device)
    back = pickle.loads(pickle.dumps(t))
    assert back.device == device
    assert torch.equal(back.cpu(), t.cpu())


def test_forked_child_gets_reinit_error(python):
    r = python("""
        import os, torch, torch_openreg
        torch.ones(1, device="openreg")          # parent initialises the runtime
        pid = os.fork()
        if pid == 0:
            try:
                torch.ones(1, device="openreg")
                os._exit(3)
            except RuntimeError as e:
                ok = "Cannot re-initialize OpenReg in forked subprocess" in str(e)
                os._exit(0 if ok else 4)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        print(torch.ones(2, device="openreg").sum().item())   # parent unaffected
    """, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "2.0"]


def test_forked_child_python_lazy_init_error(python):
    r = python("""
        import os, torch, torch_openreg
        torch.openreg.synchronize()
        pid = os.fork()
        if pid == 0:
            try:
                torch.openreg._lazy_init()
                os._exit(3)
            except RuntimeError as e:
                os._exit(0 if "forked subprocess" in str(e) else 4)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


def test_fork_before_init_is_fine(python):
    r = python("""
        import os, torch, torch_openreg
        pid = os.fork()
        if pid == 0:
            os._exit(0 if torch.ones(2, device="openreg").sum().item() == 2.0 else 5)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "0"


def test_profiler_fallback_reports_device_time(device):
    # Without a Kineto plugin the profiler times openreg ops with the
    # registered PrivateUse1 profiler stubs (events on the current stream).
    x = torch.randn(256, 256, device=device)
    with torch.autograd.profiler.profile(use_device=DEVICE_TYPE, use_kineto=False) as prof:
        y = torch.mm(x, x)
        DEVICE_MODULE.synchronize()
    mm = [e for e in prof.function_events if e.name == "aten::mm"]
    assert mm, [e.name for e in prof.function_events]
    assert mm[0].device_time_total > 0
    assert y.device == device
