"""Celery tasks of the upstream-pin loop (thin; the work is in plain functions):
``ootci.pr.check_waiting`` and ``ootci.weekly.pin_reports``."""

from __future__ import annotations

from service.config import get_settings
from service.db import get_engine
from workers.celery_app import app
from workers.pin_reports import make_weekly_reports
from workers.pr_wait import check_waiting
from workers.tasks import dispatch

# How often waiting PR runs look for their wheel (and PR statuses are owed).
CHECK_WAITING_EVERY_S = 120


@app.task(name="ootci.pr.check_waiting")  # type: ignore[untyped-decorator]
def check_waiting_pr_runs() -> dict[str, list[int]]:
    settings = get_settings()
    result = check_waiting(get_engine(settings.resolved_database_url), settings)
    dispatch(result.released)
    return {"released": result.released, "expired": result.expired}


@app.task(name="ootci.weekly.pin_reports")  # type: ignore[untyped-decorator]
def weekly_pin_reports() -> list[dict[str, object]]:
    """This week's stored pin report per backend, and the bump PRs they owe (sent by the
    outbox drain)."""
    settings = get_settings()
    made = make_weekly_reports(get_engine(settings.resolved_database_url), settings)
    return [{"backend": m.backend, "action": m.action, "reason": m.reason} for m in made]
