"""occl, the c10d backend of openreg tensors (csrc/distributed/, docs/distributed.md).

Every test starts real processes (torch.multiprocessing, start method forkserver)
that rendezvous through a FileStore and move data through occl's shared
memory; a worker's failed assertion fails the test with its traceback.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing import forkserver
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from conftest import DEVICE_MODULE, DEVICE_TYPE

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch built without c10d")

BACKEND_DIR = Path(__file__).resolve().parent.parent


def _worker(rank: int, world: int, store: str, backend: str, body: Callable[[int, int], None]
            ) -> None:
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
    DEVICE_MODULE.set_device(rank % DEVICE_MODULE.device_count())
    try:
        body(rank, world)
    finally:
        dist.destroy_process_group()


# Ranks fork from a server that imported torch once per test process: a fresh
# interpreter per rank would spend its time importing torch, not in occl. And pytest:
# a rank imports this module (its body's), so pytest, again in each rank otherwise
# (~0.15 CPU-s a rank, 16 ranks).
mp.set_forkserver_preload(["torch", "pytest"])
_start_method = "forkserver"


@pytest.fixture(scope="module", autouse=True)
def _forkserver(tmp_path_factory: pytest.TempPathFactory) -> None:
    global _start_method
    # The server is a `python -c` process, so its cwd leads its sys.path: started from
    # backend/, its `import torch` would autoload the source tree's torch_openreg (see
    # conftest.py). Ranks get the test process's sys.path back when they start.
    here = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("forkserver"))
    try:
        forkserver.ensure_running()
    except OSError:
        # Its socket lives in $TMPDIR, and a deep one is over AF_UNIX's 108 bytes.
        _start_method = "spawn"
    finally:
        os.chdir(here)


def spawn(body: Callable[[int, int], None], world: int, tmp_path: Path,
          backend: str = "occl") -> None:
    mp.start_processes(_worker, args=(world, str(tmp_path / "store"), backend, body),
                       nprocs=world, join=True, start_method=_start_method)


def dev() -> torch.device:
    return torch.device(DEVICE_TYPE, DEVICE_MODULE.current_device())


# ---- every collective, against values computed by hand ----------------------

def _collectives(rank: int, world: int) -> None:
    d = dev()
    ranks_sum = world * (world + 1) / 2  # sum of (r + 1)

    # all_reduce SUM, float32, a size no rank count divides
    x = torch.arange(1001, dtype=torch.float32, device=d) * (rank + 1)
    dist.all_reduce(x)
    torch.testing.assert_close(x.cpu(), torch.arange(1001, dtype=torch.float32) * ranks_sum)

    # larger than a ring (16 slots x 256 KiB): slots are reused while in flight
    big = torch.full((3_000_000,), float(rank + 1), device=d)
    dist.all_reduce(big)
    assert torch.equal(big.cpu(), torch.full((3_000_000,), ranks_sum))

    # integers, fewer elements than ranks
    i = torch.tensor([rank + 1], dtype=torch.int64, device=d)
    dist.all_reduce(i)
    assert i.item() == ranks_sum

    # AVG, MAX, MIN, PRODUCT
    a = torch.full((64,), float(rank), dtype=torch.float64, device=d)
    dist.all_reduce(a, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(a.cpu(), torch.full((64,), (world - 1) / 2, dtype=torch.float64))
    m = torch.tensor([rank, -rank, 10 * (rank % 2)], dtype=torch.float32, device=d)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    assert m.cpu().tolist() == [world - 1, 0, 10 if world > 1 else 0]
    m = torch.tensor([rank, -rank], dtype=torch.int32, device=d)
    dist.all_reduce(m, op=dist.ReduceOp.MIN)
    assert m.cpu().tolist() == [0, -(world - 1)]
    p = torch.full((5,), 2.0, dtype=torch.bfloat16, device=d)
    dist.all_reduce(p, op=dist.ReduceOp.PRODUCT)
    assert p.cpu().float().tolist() == [2.0**world] * 5
    h = torch.full((33,), 0.5, dtype=torch.float16, device=d)
    dist.all_reduce(h)
    assert h.cpu().float().tolist() == [0.5 * world] * 33

    # broadcast from every root
    for root in range(world):
        b = torch.full((1000,), float(rank), device=d)
        dist.broadcast(b, src=root)
        assert torch.equal(b.cpu(), torch.full((1000,), float(root)))

    # all_gather (list) and all_gather_into_tensor
    mine = torch.arange(7, dtype=torch.int32, device=d) + 100 * rank
    out = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(out, mine)
    for r, t in enumerate(out):
        assert torch.equal(t.cpu(), torch.arange(7, dtype=torch.int32) + 100 * r)
    flat = torch.empty(7 * world, dtype=torch.int32, device=d)
    dist.all_gather_into_tensor(flat, mine)
    assert torch.equal(flat.cpu(), torch.cat([torch.arange(7, dtype=torch.int32) + 100 * r
                                              for r in range(world)]))

    # reduce_scatter (list) and reduce_scatter_tensor: piece j of rank r is (r+1)*(j+1)
    pieces = [torch.full((300,), float((rank + 1) * (j + 1)), device=d) for j in range(world)]
    got = torch.empty(300, device=d)
    dist.reduce_scatter(got, pieces)
    assert torch.equal(got.cpu(), torch.full((300,), ranks_sum * (rank + 1)))
    assert torch.equal(pieces[rank].cpu(), torch.full((300,), float((rank + 1) ** 2))), \
        "reduce_scatter modified its input"
    whole = torch.cat(pieces)
    dist.reduce_scatter_tensor(got, whole, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(got.cpu(), torch.full((300,), ranks_sum * (rank + 1) / world))

    dist.barrier()


@pytest.mark.parametrize("world", [2, 4])
def test_collectives_give_the_expected_values(world: int, tmp_path: Path) -> None:
    spawn(_collectives, world, tmp_path)


# ---- asynchronous work on the device's stream ---------------------------------

def _async_work(rank: int, world: int) -> None:
    d = dev()
    if rank == 1:
        time.sleep(1.0)  # rank 0's collective cannot finish before this
    x = torch.empty(1 << 16, device=d)
    # Inputs are produced on the current stream: the collective must wait for
    # them (the stream is held for 300 ms before the fill runs).
    DEVICE_MODULE._C._sleep(300)
    x.fill_(float(rank + 1))
    work = dist.all_reduce(x, async_op=True)
    work.wait()  # only orders the current stream after the collective
    if rank == 0:
        # rank 1 is still asleep: wait() returned without the host waiting
        assert not work.is_completed()
    y = x * 2  # queued behind the collective on the current stream
    assert torch.equal(y.cpu(), torch.full((1 << 16,), 2.0 * 3))
    fut = dist.all_reduce(x, async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0].cpu() * 2)
    assert torch.equal(doubled.wait(), torch.full((1 << 16,), 12.0))
    assert work.is_completed() and work.is_success()


def test_work_completes_on_the_device_stream(tmp_path: Path) -> None:
    spawn(_async_work, 2, tmp_path)


# ---- point to point ------------------------------------------------------------

def _p2p(rank: int, world: int) -> None:
    d = dev()
    peer = 1 - rank
    t = torch.arange(10, dtype=torch.float32, device=d) + rank
    if rank == 0:
        dist.send(t, dst=1, tag=3)
    else:
        got = torch.empty(10, device=d)
        dist.recv(got, src=0, tag=3)
        assert torch.equal(got.cpu(), torch.arange(10, dtype=torch.float32))
    # Both ranks send first, then receive, 16 MiB each way (4x a ring): sends
    # and receives run on separate streams, so this does not deadlock.
    out = torch.full((4 << 20,), float(rank), device=d)
    into = torch.empty(4 << 20, device=d)
    sent = dist.isend(out, dst=peer)
    received = dist.irecv(into, src=peer)
    sent.wait()
    received.wait()
    assert torch.equal(into.cpu(), torch.full((4 << 20,), float(peer)))
    ops = [dist.P2POp(dist.isend, t, peer), dist.P2POp(dist.irecv, into[:10], peer)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(into[:10].cpu(), torch.arange(10, dtype=torch.float32) + peer)


def test_send_and_recv(tmp_path: Path) -> None:
    spawn(_p2p, 2, tmp_path)


def _mismatched_tag(rank: int, world: int) -> None:
    d = dev()
    t = torch.zeros(4, device=d)
    if rank == 0:
        dist.send(t, dst=1, tag=1)
        return
    work = dist.irecv(t, src=0, tag=2)
    DEVICE_MODULE.synchronize()
    deadline = time.monotonic() + 30
    while not work.is_completed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert work.is_completed() and not work.is_success()
    with pytest.raises(dist.DistBackendError, match="does not match"):
        work.wait()
    # The group is unusable after a failed transfer, and says why.
    with pytest.raises(dist.DistBackendError, match="earlier operation"):
        dist.recv(t, src=0, tag=1)


def test_mismatched_tags_fail_the_receive(tmp_path: Path) -> None:
    spawn(_mismatched_tag, 2, tmp_path)


def _peer_dies(rank: int, world: int) -> None:
    if rank == 1:
        os._exit(0)  # no goodbye: the segment stays mapped, the pid goes away
    x = torch.ones(1024, device=dev())
    work = dist.all_reduce(x, async_op=True)
    deadline = time.monotonic() + 60  # the group's timeout is 30 min: this is the pid check
    while not work.is_completed() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert work.is_completed() and not work.is_success()
    with pytest.raises(dist.DistBackendError, match=r"rank 1 \(pid \d+\) exited"):
        work.wait()


def test_a_dead_peer_fails_the_collective(tmp_path: Path) -> None:
    spawn(_peer_dies, 2, tmp_path)


# ---- DDP: training on openreg/occl matches CPU/gloo ---------------------------

def _ddp(rank: int, world: int) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(rank)  # replicas start different: DDP's broadcast must fix that
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    on_cpu = DDP(copy.deepcopy(model))  # gloo (the cpu backend of this group)
    on_device = DDP(copy.deepcopy(model).to(dev()))  # occl
    assert on_device.process_group is on_cpu.process_group
    opt_cpu = torch.optim.SGD(on_cpu.parameters(), lr=0.1)
    opt_dev = torch.optim.SGD(on_device.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    for _ in range(5):
        inputs = torch.randn(8, 16, generator=g)
        target = torch.randn(8, 4, generator=g)
        for ddp, opt, device in ((on_cpu, opt_cpu, "cpu"), (on_device, opt_dev, dev())):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(inputs.to(device)), target.to(device))
            loss.backward()
            opt.step()
    for a, b in zip(on_cpu.parameters(), on_device.parameters(), strict=True):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)
    # and the replicas agree across ranks (gathered through occl)
    flat = torch.cat([p.detach().flatten() for p in on_device.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    for other in everyone:
        assert torch.equal(other.cpu(), flat.cpu())


def test_ddp_on_openreg_matches_gloo_on_cpu(tmp_path: Path) -> None:
    spawn(_ddp, 2, tmp_path, backend=f"cpu:gloo,{DEVICE_TYPE}:occl")


# ---- registration and docs --------------------------------------------------------

def test_occl_is_the_default_backend_of_openreg() -> None:
    assert dist.Backend.default_device_backend_map.get(DEVICE_TYPE) == "occl"
    assert dist.Backend.backend_capability["occl"] == [DEVICE_TYPE]


def test_docs_page_quotes_existing_markers() -> None:
    done = subprocess.run([sys.executable, "docs/quote.py", "--check"], cwd=BACKEND_DIR,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    page = (BACKEND_DIR / "docs" / "distributed.md").read_text()
    assert "<!-- quote: csrc/distributed/" in page
