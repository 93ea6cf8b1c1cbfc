"""torch.compile on openreg: Inductor generates the device's kernels (C++ over
device memory, launched on the device's stream) and the results match eager
on CPU; graph breaks, dynamic shapes, autocast, autograd and recompilation."""

from __future__ import annotations

import copy
import os

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
import torch._inductor.config
import torch_openreg._C as _C
from conftest import DEVICE_MODULE, DEVICE_TYPE
from torch._inductor.utils import run_and_get_code

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(autouse=True, scope="module")
def _no_vec_isa_probe():
    """Inductor picks its CPU vector ISA from the CPU's flags after dry-compiling and
    loading a program per candidate (avx512_vnni, avx512, avx2: ~1.9 CPU-s of g++ each,
    a third of the first compile's cost in a fresh run dir). `vec_isa_ok` trusts the
    flags: the same ISA is picked (and its bf16/AMX sub-checks still run), and a compiler
    that cannot build it fails the kernels' own compile here instead of falling back to
    another ISA unnoticed. The variable TORCHINDUCTOR_VEC_ISA_OK, when set, wins."""
    if "TORCHINDUCTOR_VEC_ISA_OK" in os.environ:
        yield
        return
    with torch._inductor.config.patch({"cpp.vec_isa_ok": True}):
        yield


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32),
                               torch.nn.LayerNorm(32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _block() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0,
                                            batch_first=True).eval()


def test_registrations():
    from torch._dynamo.device_interface import get_interface_for_device
    from torch._inductor.codegen.common import (
        get_wrapper_codegen_for_device,
        init_backend_registration,
    )

    assert "openreg" in torch._dynamo.list_backends()
    interface = get_interface_for_device(DEVICE_TYPE)
    assert interface.device_count() == DEVICE_MODULE.device_count()
    assert interface.get_raw_stream(0) != 0
    init_backend_registration()
    assert get_wrapper_codegen_for_device(DEVICE_TYPE).__name__ == "OpenRegPythonWrapperCodegen"


def test_mlp_compiles_to_device_kernels_and_matches_cpu_eager():
    model = _mlp()
    x = torch.randn(8, 16)
    want = model(x)
    compiled = torch.compile(copy.deepcopy(model).to(DEVICE_TYPE))
    _C._reset_kernel_counters()
    got, codes = run_and_get_code(compiled, x.to(DEVICE_TYPE))
    code = "\n".join(codes)  # the forward, and the backward if compiled ahead
    # Inductor's own C++ kernels, bound to launch on the openreg stream.
    assert "openreg_load_kernel(" in code and f"device='{DEVICE_TYPE}'" in code
    assert _C._kernel_counters()["native_launches"] > 0
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)


def test_transformer_block_matches_cpu_eager():
    block = _block()
    x = torch.randn(2, 10, 32)
    with torch.no_grad():
        want = block(x)
        got = torch.compile(copy.deepcopy(block).to(DEVICE_TYPE))(x.to(DEVICE_TYPE))
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)


def test_autograd_under_compile_matches_cpu():
    model = _mlp()
    x = torch.randn(8, 16)
    model(x).square().mean().backward()
    want = [p.grad for p in model.parameters()]
    on_device = copy.deepcopy(model).to(DEVICE_TYPE)
    on_device.zero_grad()
    torch.compile(on_device)(x.to(DEVICE_TYPE)).square().mean().backward()
    for p, w in zip(on_device.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad.cpu(), w, rtol=1e-4, atol=1e-5)


def test_graph_break_still_matches():
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")

    def f(x):
        y = torch.sin(x) * 2
        torch._dynamo.graph_break()
        return torch.cos(y) + x.sum()

    x = torch.randn(32)
    got = torch.compile(f, backend=counter)(x.to(DEVICE_TYPE))
    assert counter.frame_count == 2  # two graphs around the break
    torch.testing.assert_close(got.cpu(), f(x))


def test_dynamic_shapes_compile_once():
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")

    def f(x):
        return torch.nn.functional.softmax(x * 3 + 1, dim=-1).sum(0)

    compiled = torch.compile(f, backend=counter, dynamic=True)
    for rows in (3, 7, 12):
        x = torch.randn(rows, 9)
        torch.testing.assert_close(compiled(x.to(DEVICE_TYPE)).cpu(), f(x))
    assert counter.frame_count == 1


def test_recompiles_on_dtype_change_only():
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    compiled = torch.compile(lambda x: (x * x + 1).relu(), backend=counter)
    x = torch.randn(5, 5, device=DEVICE_TYPE)
    compiled(x)
    compiled(x + 1)
    assert counter.frame_count == 1
    compiled(x.double())
    assert counter.frame_count == 2


def test_autocast_under_compile():
    a, b = torch.randn(8, 16), torch.randn(16, 4)

    def f(a, b):
        with torch.autocast(DEVICE_TYPE, dtype=torch.bfloat16):
            return torch.relu(a @ b)

    got = torch.compile(f)(a.to(DEVICE_TYPE), b.to(DEVICE_TYPE))
    assert got.dtype == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = torch.relu(a @ b)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-2, atol=1e-2)


def test_openreg_backend_by_name():
    x = torch.randn(64)
    f = lambda t: torch.tanh(t) * t.exp()  # noqa: E731
    got = torch.compile(f, backend="openreg")(x.to(DEVICE_TYPE))
    assert got.device.type == DEVICE_TYPE
    torch.testing.assert_close(got.cpu(), f(x))


def test_compiled_kernels_are_ordered_on_a_side_stream():
    """Kernels run on the current stream: work queued before on it is seen."""
    s = DEVICE_MODULE.Stream()
    f = torch.compile(lambda t: t * 2 + 1)
    with DEVICE_MODULE.stream(s):
        x = torch.ones(1 << 16, device=DEVICE_TYPE)
        x.mul_(3)  # queued on s, before the compiled kernel
        y = f(x)
    s.synchronize()
    assert torch.equal(y.cpu(), torch.full((1 << 16,), 7.0))
