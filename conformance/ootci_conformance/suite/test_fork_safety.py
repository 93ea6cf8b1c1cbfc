"""Fork safety: importing does not initialise the device; a forked child of an initialised
parent gets a clean error, not a hang or a crash."""

import pytest

pytestmark = pytest.mark.conformance("fork_safety", "recommended")


def test_import_does_not_initialise_the_device(dut):
    r = dut.run_python(f"""
        import torch
        m = getattr(torch, {dut.name!r})
        print(m.is_initialized())
        torch.empty(1, device={dut.name!r})
        print(m.is_initialized())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True"]


def test_forked_child_of_initialised_parent_gets_an_error(dut):
    r = dut.run_python(f"""
        import multiprocessing, torch
        torch.empty(1, device={dut.name!r})

        def child(q):
            try:
                torch.empty(1, device={dut.name!r})
                q.put("no error")
            except RuntimeError as exc:
                q.put("fork" if "fork" in str(exc) else repr(exc))

        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=child, args=(q,))
        p.start()
        p.join(60)
        print(q.get(timeout=5) if p.exitcode == 0 else f"exit {{p.exitcode}}")
    """, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "fork"
