"""Autoload: `import torch` alone brings the device (a `torch.backends` entry point)."""

import pytest

pytestmark = pytest.mark.conformance("autoload", "recommended")


def test_import_torch_alone_enables_the_device(dut):
    r = dut.run_python(
        f"import torch; m = getattr(torch, {dut.name!r}, None); "
        "print(m is not None and m.is_available())",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}, load_backend=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_autoload_can_be_disabled(dut):
    r = dut.run_python(
        "import torch; print(torch._C._get_privateuse1_backend_name())",
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, load_backend=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "privateuseone"
