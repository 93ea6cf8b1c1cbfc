"""Autoload through the `torch.backends` entry point, in fresh interpreters.

Every run here is `fresh=True`: a fork of the preloaded interpreter (_preloaded.py) has
imported torch already, which is the very thing these tests watch.
"""

from importlib.metadata import entry_points

from conftest import DEVICE_TYPE


def test_entry_point_is_declared():
    eps = entry_points(group="torch.backends")
    assert any(ep.name == "torch_openreg" and ep.value == "torch_openreg:_autoload" for ep in eps)


def test_import_torch_alone_enables_openreg(python):
    r = python("""
        import sys, torch
        x = torch.ones(3, device="openreg") * 2
        print("torch_openreg" in sys.modules, x.device, x.sum().item())
    """, fresh=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", f"{DEVICE_TYPE}:0", "6.0"]


def test_autoload_can_be_disabled(python):
    r = python("""
        import sys, torch
        print("torch_openreg" in sys.modules, hasattr(torch, "openreg"))
        try:
            torch.ones(1, device="openreg")
        except RuntimeError as e:
            print("error")
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, fresh=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "error"]


def test_explicit_import_after_disabled_autoload_works(python):
    r = python("""
        import torch, torch_openreg
        print(torch.ones(2, device="openreg").cpu().tolist())
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, fresh=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[1.0, 1.0]"


def test_import_is_lazy_about_the_device(python):
    # Importing must not initialise the runtime (fork safety, cheap import).
    r = python("""
        import torch, torch_openreg
        print(torch.openreg.is_initialized())
        torch.ones(1, device="openreg")
        print(torch.openreg.is_initialized())
    """, fresh=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"]
