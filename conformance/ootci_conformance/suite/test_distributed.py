"""torch.distributed: a c10d backend registered for the device, collectives between
processes on device tensors."""

import pytest

pytestmark = pytest.mark.conformance("distributed", "optional")


def _backend_for(name):
    import torch.distributed as dist

    if not dist.is_available():
        return None
    return dist.Backend.default_device_backend_map.get(name)


def test_a_c10d_backend_is_registered_for_the_device(dut):
    assert _backend_for(dut.name) is not None, (
        f"no c10d backend in torch.distributed.Backend.default_device_backend_map for {dut.name}")


def test_all_reduce_between_two_processes(dut, tmp_path):
    backend = _backend_for(dut.name)
    if backend is None:
        pytest.fail(f"no c10d backend registered for {dut.name}")
    r = dut.run_python(f"""
        import torch, torch.distributed as dist, torch.multiprocessing as mp

        def work(rank):
            dist.init_process_group({backend!r}, init_method="file://{tmp_path / 'store'}",
                                    rank=rank, world_size=2)
            t = torch.full((4,), float(rank + 1)).to({dut.name!r})
            dist.all_reduce(t)
            assert torch.equal(t.cpu(), torch.full((4,), 3.0)), t.cpu()
            dist.destroy_process_group()

        if __name__ == "__main__":
            mp.spawn(work, nprocs=2)
        print("ok")
    """, timeout=300, script_dir=tmp_path)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.strip().endswith("ok")
