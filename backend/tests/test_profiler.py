"""The Kineto activity profiler: device work in torch.profiler Chrome traces.

Each test profiles real device work, exports the Chrome trace and reads it
back: the activities must be there with device timestamps inside the window,
on the row of the stream that ran them, carrying the correlation id of the
host op that submitted them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import DEVICE_MODULE
from torch.profiler import ProfilerActivity, profile
from torch_openreg import _C

pytestmark = pytest.mark.skipif(
    not _C._has_kineto_plugin(),
    reason="this torch has no PrivateUse1 Kineto plugin API (PrivateUse1ProfilerRegistry, "
    "torch >= 2.13 built with Kineto); only the ProfilerStubs fallback is available",
)

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _trace(prof, tmp_path: Path) -> list[dict]:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())["traceEvents"]


def _device_events(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS]


def _ops(events: list[dict], name: str) -> list[dict]:
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"
            and e["name"] == name]


@pytest.mark.openreg_runtime  # device activities need the runtime's tracing (shmreg has none)
def test_kernels_and_copies_are_device_activities(device, tmp_path):
    host = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        x = host.to(device)            # H2D
        y = torch.mm(x, x)             # a kernel
        z = y.clone()                  # D2D or a kernel, not asserted
        back = z.cpu()                 # D2H
        DEVICE_MODULE.synchronize()
    events = _trace(prof, tmp_path)
    dev = _device_events(events)
    names = [e["name"] for e in dev]
    assert any(n.startswith("Memcpy HtoD") for n in names), names
    assert any(n.startswith("Memcpy DtoH") for n in names), names
    kernels = [e for e in dev if e["cat"] == "kernel"]
    assert kernels, names
    # The H2D copy moved exactly the tensor's bytes.
    h2d = [e for e in dev if e["name"].startswith("Memcpy HtoD")]
    assert any(e["args"]["bytes"] == host.numel() * host.element_size() for e in h2d)
    assert torch.allclose(back, host @ host, atol=1e-4)


@pytest.mark.openreg_runtime  # device activities need the runtime's tracing (shmreg has none)
def test_kernel_carries_the_correlation_id_of_its_op(device, tmp_path):
    x = torch.randn(128, 128, device=device)
    DEVICE_MODULE.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch.mm(x, x)
        DEVICE_MODULE.synchronize()
    events = _trace(prof, tmp_path)
    mm_ops = _ops(events, "aten::mm")
    assert len(mm_ops) == 1
    op = mm_ops[0]
    kernels = [e for e in _device_events(events) if e["cat"] == "kernel"]
    linked = [k for k in kernels if k["args"]["correlation"] == op["args"]["External id"]]
    assert linked, (op["args"], [k["args"] for k in kernels])
    k = linked[0]
    assert k["name"] == "openreg kernel: aten::mm"
    # Device time is real time on the same clock: the kernel starts after the
    # op began submitting it and takes a positive duration.
    assert k["ts"] >= op["ts"]
    assert k["dur"] > 0
    # The launch sits on the op's host thread, submitted before the kernel
    # ran, with an arrow (flow start -> flow end) from it to the kernel.
    launches = [e for e in events if e.get("name") == "orLaunchKernel"
                and e["args"]["correlation"] == op["args"]["External id"]]
    assert len(launches) == 1
    launch = launches[0]
    assert (launch["pid"], launch["tid"]) == (op["pid"], op["tid"])
    assert op["ts"] <= launch["ts"] <= k["ts"]
    flows = {e["ph"]: e for e in events if e.get("cat") == "ac2g"
             and (e["pid"], e["tid"], e["ts"]) in {(launch["pid"], launch["tid"], launch["ts"]),
                                                    (k["pid"], k["tid"], k["ts"])}}
    assert set(flows) == {"s", "f"} and flows["s"]["id"] == flows["f"]["id"]
    # key_averages counts the kernel as the op's device time.
    mm = [e for e in prof.key_averages() if e.key == "aten::mm"]
    assert mm and mm[0].device_time_total > 0


@pytest.mark.openreg_runtime  # device activities need the runtime's tracing (shmreg has none)
def test_work_lands_on_the_row_of_its_stream(device, tmp_path):
    x = torch.randn(64, 64, device=device)
    side = DEVICE_MODULE.Stream()
    DEVICE_MODULE.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch.add(x, 1)
        with DEVICE_MODULE.stream(side):
            torch.mul(x, 2)
        DEVICE_MODULE.synchronize()
    events = _trace(prof, tmp_path)
    kernels = {e["name"]: e for e in _device_events(events) if e["cat"] == "kernel"}
    add, mul = kernels["openreg kernel: aten::add"], kernels["openreg kernel: aten::mul"]
    assert add["tid"] != mul["tid"]
    assert add["args"]["stream"] != mul["args"]["stream"]
    # Each stream row is named after the stream it shows.
    rows = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
            if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert rows[(mul["pid"], mul["tid"])] == f"openreg stream {mul['args']['stream']}"


@pytest.mark.openreg_runtime  # device activities need the runtime's tracing (shmreg has none)
def test_allocation_is_recorded(device, tmp_path):
    DEVICE_MODULE.synchronize()
    DEVICE_MODULE.empty_cache()
    # An odd size no cached block fits, so the allocator must ask the runtime.
    nbytes = 3 * 1024 * 1024 + 4096
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        t = torch.empty(nbytes, dtype=torch.uint8, device=device)
        del t
        DEVICE_MODULE.empty_cache()
    events = _trace(prof, tmp_path)
    mallocs = [e for e in events if e.get("name") == "orMalloc"]
    frees = [e for e in events if e.get("name") == "orFree"]
    assert any(e["args"]["bytes"] >= nbytes for e in mallocs), mallocs
    assert any(e["args"]["bytes"] >= nbytes for e in frees), frees


def test_cpu_only_trace_has_no_device_activities(device, tmp_path):
    x = torch.randn(32, 32, device=device)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.mm(x, x)
        DEVICE_MODULE.synchronize()
    assert _device_events(_trace(prof, tmp_path)) == []


@pytest.mark.openreg_runtime  # device activities need the runtime's tracing (shmreg has none)
def test_work_after_the_window_is_not_recorded(device, tmp_path):
    x = torch.randn(32, 32, device=device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch.add(x, 1)
        DEVICE_MODULE.synchronize()
    torch.mul(x, 3)
    DEVICE_MODULE.synchronize()
    # A second window starts empty: nothing from between the windows leaks in.
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof2:
        torch.mm(x, x)
        DEVICE_MODULE.synchronize()
    first = {e["name"] for e in _device_events(_trace(prof, tmp_path))}
    second = {e["name"] for e in _device_events(_trace(prof2, tmp_path))}
    assert "openreg kernel: aten::add" in first
    assert "openreg kernel: aten::mul" not in first | second
    assert second == {"openreg kernel: aten::mm"}


@pytest.mark.openreg_runtime  # device activities need the runtime's tracing (shmreg has none)
def test_work_on_the_second_device_is_attributed_to_it(two_devices, tmp_path):
    d0, d1 = two_devices
    a, b = torch.randn(16, 16, device=d0), torch.randn(16, 16, device=d1)
    DEVICE_MODULE.synchronize(0)
    DEVICE_MODULE.synchronize(1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch.add(a, 1)
        torch.mul(b, 2)
        DEVICE_MODULE.synchronize(0)
        DEVICE_MODULE.synchronize(1)
    kernels = {e["name"]: e for e in _device_events(_trace(prof, tmp_path)) if e["cat"] == "kernel"}
    add, mul = kernels["openreg kernel: aten::add"], kernels["openreg kernel: aten::mul"]
    assert (add["args"]["device"], mul["args"]["device"]) == (0, 1)
    assert add["pid"] != mul["pid"]
