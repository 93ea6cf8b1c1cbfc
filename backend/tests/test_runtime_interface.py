"""The runtime interface (csrc/runtime/rt/Runtime.h) and its two runtimes.

The same build runs on the emulated openreg runtime and on shmreg, whose
device memory is a memfd owned by a separate shmreg-server process. Each test
starts fresh interpreters with TORCH_OPENREG_RUNTIME set, so this file checks
both runtimes whichever one the rest of the suite runs on.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_python

# Exercises the interface end to end: devices, allocation, copies both ways,
# kernels on two streams ordered by an event, memset, pinned memory, stats.
_SAME_BEHAVIOUR = """
import json, os, torch, torch_openreg
from torch_openreg import _runtime
dev = _runtime.DEVICE_TYPE
mod = getattr(torch, dev)
out = {"count": mod.device_count(), "accel": torch.accelerator.current_accelerator().type == dev}
a = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(f"{dev}:1")
out["device"] = str(a.device).replace(dev, "DEV")
s1, s2 = mod.Stream(device=1), mod.Stream(device=1)
with mod.device(1):
    with mod.stream(s1):
        b = (a * 2 + 1).sum(dim=0)
        e = mod.Event(enable_timing=True)
        e.record(s1)
    s2.wait_event(e)
    with mod.stream(s2):
        c = b.relu() - torch.zeros(4, device=f"{dev}:1")
    s2.synchronize()
out["c"] = c.cpu().tolist()
pinned = torch.ones(5).pin_memory()
out["pinned"] = pinned.is_pinned()
out["h2d"] = pinned.to(dev, non_blocking=True).add(1).cpu().tolist()
out["allocated"] = mod.memory_allocated(1) > 0
print(json.dumps(out, sort_keys=True))
"""


def _run(code: str, runtime: str, **env: str):
    return run_python(code, env={"TORCH_OPENREG_RUNTIME": runtime, **env})


def test_both_runtimes_behave_alike_through_the_interface():
    results = {}
    for runtime in ("openreg", "shmreg"):
        r = _run(_SAME_BEHAVIOUR, runtime)
        assert r.returncode == 0, f"{runtime}: {r.stderr}"
        results[runtime] = json.loads(r.stdout.strip().splitlines()[-1])
    assert results["openreg"] == results["shmreg"]
    assert results["shmreg"]["c"] == [27.0, 33.0, 39.0, 45.0]
    assert results["shmreg"]["count"] == 2 and results["shmreg"]["accel"]


# The server is the client's child; the client may read its memory
# (/proc/<pid>/mem) because it is the server's parent.
_SERVER_HOLDS_MEMORY = """
import os, signal, time, torch, torch_openreg

def servers():
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if comm == "shmreg-server" and int(rest[1]) == os.getpid():
            found.append(int(pid))
    return found

def holds_memfd(pid):
    found = False
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:  # the directory listing's own fd is gone by now
            found |= "memfd:shmreg-device-memory" in os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            pass
    return found

def memfd_mapping(pid):
    for line in open(f"/proc/{pid}/maps"):
        if "memfd:shmreg-device-memory" in line:
            return int(line.split("-")[0], 16)
    return None

assert servers() == [], "no server before the first device call"
t = torch.arange(1000, dtype=torch.int32, device="shmreg:1") * 3
# Device 1's stream, not the current device's: unsynchronised, a loaded machine reads
# the server's memory before the kernel has written it.
torch.shmreg.synchronize(1)
[server] = servers()
print("server holds memfd:", holds_memfd(server))
print("client holds memfd:", holds_memfd(os.getpid()))
client_base, server_base = memfd_mapping(os.getpid()), memfd_mapping(server)
with open(f"/proc/{server}/mem", "rb") as mem:
    mem.seek(server_base + (t.data_ptr() - client_base))
    seen = torch.frombuffer(bytearray(mem.read(4000)), dtype=torch.int32)
print("server sees the tensor:", torch.equal(seen, t.cpu()))

os.kill(server, signal.SIGKILL)
os.waitpid(server, 0)
start = time.monotonic()
try:
    torch.empty(1 << 24, device="shmreg:0")
    print("allocated after the server died")
except RuntimeError as e:
    print("error:", str(e).splitlines()[0])
print("fast:", time.monotonic() - start < 5)
"""


def test_shmreg_memory_lives_in_the_server_process():
    r = _run(_SERVER_HOLDS_MEMORY, "shmreg")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "server holds memfd: True" in lines
    assert "client holds memfd: False" in lines  # only a mapping: the memory is the server's
    assert "server sees the tensor: True" in lines
    [error] = [line for line in lines if line.startswith(("error:", "allocated"))]
    assert error.startswith("error: shmreg error"), error  # named after its runtime
    assert "shmreg server process" in error and "has exited" in error, error
    assert "fast: True" in lines


_FORKS = """
import os, torch, torch_openreg

def in_child(body):
    pid = os.fork()
    if pid == 0:
        try:
            body()
            os._exit(0)
        except Exception as e:
            print("child:", str(e).splitlines()[0], flush=True)
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

def use():
    assert (torch.ones(3, device="shmreg") + 1).sum().item() == 6

print("before init:", in_child(use))
use()
print("after init:", in_child(use))
"""


def test_shmreg_forks_before_init_work_and_after_init_are_refused():
    r = _run(_FORKS, "shmreg")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "before init: 0" in lines
    assert "after init: 1" in lines
    [child] = [line for line in lines if line.startswith("child:")]
    assert "forked subprocess" in child and "spawn" in child, child


@pytest.mark.parametrize("name", ["cuda", "OPENREG"])
def test_unknown_runtime_is_refused_at_import(name):
    r = _run("import torch", name)  # autoload imports torch_openreg
    assert r.returncode != 0
    assert "TORCH_OPENREG_RUNTIME" in r.stderr and "shmreg" in r.stderr


# A CI sandbox (ootci's among them) sets RLIMIT_FSIZE; shmreg's device memory is a file.
_UNDER_A_FILE_SIZE_LIMIT = """
import resource
resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))
import torch, torch_openreg
x = torch.arange(1 << 20, dtype=torch.float32, device="shmreg:1")
free, total = torch.shmreg.mem_get_info(1)
print((x * 2).sum().item() == float((1 << 20) * ((1 << 20) - 1)), total)
"""


def test_shmreg_device_memory_fits_the_file_size_limit():
    # Fresh: the limit must be in place before the import reads the runtime's config.
    r = run_python(_UNDER_A_FILE_SIZE_LIMIT, env={"TORCH_OPENREG_RUNTIME": "shmreg"}, fresh=True)
    assert r.returncode == 0, r.stderr
    works, total = r.stdout.split()
    assert works == "True"
    assert 0 < int(total) <= 128 << 20  # each of the 2 devices its share of 256 MiB
