"""The Celery application: ``celery -A workers.celery_app worker`` (or ``ootci worker``).

Configuration comes from :func:`service.config.get_settings`, loaded lazily (when Celery
first reads its config), so importing this module does no I/O.

Delivery semantics: ``acks_late`` + ``reject_on_worker_lost`` mean a task whose worker
dies is delivered again; running it twice is harmless because ``execute_run`` first claims
the run (a finished run, or one leased by a live worker, is skipped). The broker's
visibility timeout equals the run lease: a message held by a vanished worker comes back
exactly when its run becomes re-claimable.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from celery import Celery
from celery.signals import beat_init, worker_init, worker_process_init

from service.config import Settings, get_settings
from service.db import dispose_engines
from service.secrets import SecretsError, load_and_scrub, make_nondumpable

QUEUE = "ootci"
# Celery ships no type hints: its decorators are marked `untyped-decorator` where used.


def run_time_limits(settings: Settings) -> tuple[int, int]:
    """(soft, hard) seconds for one run: provision, build and test each get
    ``step_timeout_s``, plus slack for collecting results."""
    soft = 3 * settings.step_timeout_s + 600
    return soft, soft + 300


# Resident memory (KiB) after which a pool process is replaced once its task ends.
WORKER_MAX_MEMORY_KIB = 1024 * 1024


def celery_config(settings: Settings) -> dict[str, Any]:
    soft, hard = run_time_limits(settings)
    return {
        "broker_url": settings.broker_url or "memory://",
        "result_backend": settings.result_backend or None,
        "task_ignore_result": not settings.result_backend,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_default_queue": QUEUE,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        # A pool process is replaced when it has grown past 1 GiB (a leak), not every N
        # tasks: each run queues three bookkeeping tasks after it (outbox, bisection,
        # notifications), so 50 tasks was ~12 runs, and the replacement left its worker
        # slot idle ~1.7 s while the message waited for the new process (issue #31,
        # nightly_slo's hand-offs). The task count stays as a backstop.
        "worker_max_tasks_per_child": 1000,
        "worker_max_memory_per_child": WORKER_MAX_MEMORY_KIB,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {"visibility_timeout": settings.run_lease_s},
        "task_annotations": {
            "ootci.run.execute": {"soft_time_limit": soft, "time_limit": hard},
        },
        "timezone": "UTC",
        "enable_utc": True,
        "worker_hijack_root_logger": False,
        "beat_schedule": _beat_schedule(settings),
    }


def _beat_schedule(settings: Settings) -> dict[str, Any]:
    from workers.schedule import beat_schedule

    return beat_schedule(settings)


app = Celery("ootci", include=["workers.tasks"])
app.add_defaults(lambda: celery_config(get_settings()))


@worker_init.connect  # type: ignore[untyped-decorator]
def _start_worker(**_kwargs: Any) -> None:
    _scrub_secrets()
    _refuse_without_sandbox()


@beat_init.connect  # type: ignore[untyped-decorator]
def _start_beat(**_kwargs: Any) -> None:
    _scrub_secrets()


def _scrub_secrets() -> None:
    # The main process of `celery worker`/`celery beat` (also when not started by `ootci`):
    # secrets out of its environment, before its pool forks (docs/security.md). SystemExit,
    # not an exception, here and below: Celery logs and ignores what a signal handler raises.
    try:
        load_and_scrub()
    except SecretsError as exc:
        sys.stderr.write(f"error: {exc}\n")
        raise SystemExit(2) from None


def _refuse_without_sandbox() -> None:
    """A worker that cannot seal a step does not start: it would take runs from the queue
    that a sealed worker can serve, and run their code with its own rights."""
    from workers.pipeline.isolation.policy import refusal

    reason = refusal(get_settings())
    if reason is not None:
        print(f"ootci worker: {reason}", file=sys.stderr, flush=True)
        raise SystemExit(2)


@worker_process_init.connect  # type: ignore[untyped-decorator]
def _fresh_engine_after_fork(**_kwargs: Any) -> None:
    # A pooled connection inherited from the parent would be shared by two processes.
    dispose_engines()
    # Inherited through fork already; said again so a pool child never depends on it.
    make_nondumpable()


def run_worker(argv: Sequence[str] = ()) -> None:
    """``ootci worker [celery worker options]``: a prefork worker on the ootci queue."""
    app.worker_main(["worker", "--loglevel=INFO", f"--queues={QUEUE}", *argv])


def run_beat(argv: Sequence[str] = ()) -> None:
    """``ootci beat [celery beat options]``: the scheduler (exactly one per deployment)."""
    app.start(["beat", "--loglevel=INFO", *argv])
