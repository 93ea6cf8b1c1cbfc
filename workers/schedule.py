"""The whole beat schedule, in one place. Times come from settings (OOTCI_NIGHTLY_CRON,
OOTCI_WEEKLY_CRON, crontab syntax, UTC); every entry expires so a scheduler that was down
does not fire a pile of stale jobs when it comes back."""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

from service.config import Settings

SWEEP_EVERY_S = 300
# Reports delayed by a GitHub outage or a rate limit go out at most this late after it ends.
DRAIN_OUTBOX_EVERY_S = 120
PR_CHECK_WAITING_EVERY_S = 120
# Bisections advance as their probes finish; this only picks up a lost message.
BISECT_ADVANCE_EVERY_S = 300
# A queued run older than this probably lost its message (a publish that failed after the
# commit): send it again. Duplicates are harmless, the claim lets only one through.
QUEUED_STALE_AFTER_S = 1800


def cron(expression: str) -> crontab:
    minute, hour, day_of_month, month_of_year, day_of_week = expression.split()
    return crontab(
        minute=minute,
        hour=hour,
        day_of_month=day_of_month,
        month_of_year=month_of_year,
        day_of_week=day_of_week,
    )


def beat_schedule(settings: Settings) -> dict[str, dict[str, Any]]:
    return {
        # Every registered backend x (the pins + nightly), once a night. If it cannot start
        # within 6 h it expires: by then it would collide with the next working day.
        "nightly-matrix": {
            "task": "ootci.nightly.schedule",
            "schedule": cron(settings.nightly_cron),
            "options": {"expires": 6 * 3600},
        },
        # The newest torch build each backend is green on: the pin-bump proposal's input.
        "weekly-pin-report": {
            "task": "ootci.weekly.pin_reports",
            "schedule": cron(settings.weekly_cron),
            "options": {"expires": 24 * 3600},
        },
        # Re-dispatch runs stuck in queued (lost message) or running on a dead lease. Expires
        # with its own period: a missed sweep is replaced by the next one.
        "sweep-stale-runs": {
            "task": "ootci.sweep.stale",
            "schedule": float(SWEEP_EVERY_S),
            "options": {"expires": SWEEP_EVERY_S},
        },
        # PR runs waiting for their upstream build: queued once the wheel exists, expired
        # after OOTCI_PR_WHEEL_WAIT_S.
        "pr-check-waiting": {
            "task": "ootci.pr.check_waiting",
            "schedule": float(PR_CHECK_WAITING_EVERY_S),
            "options": {"expires": PR_CHECK_WAITING_EVERY_S},
        },
        # Move nightly bisections on (a probe run's end normally does it at once).
        "advance-bisections": {
            "task": "ootci.bisect.advance",
            "schedule": float(BISECT_ADVANCE_EVERY_S),
            "options": {"expires": BISECT_ADVANCE_EVERY_S},
        },
        # Send what ootci owes GitHub: runs trigger a drain as they finish; this one picks
        # up what waited for an outage, a rate limit or a fixed token.
        "drain-github-outbox": {
            "task": "ootci.github.drain_outbox",
            "schedule": float(DRAIN_OUTBOX_EVERY_S),
            "options": {"expires": DRAIN_OUTBOX_EVERY_S},
        },
        # Notifications that waited for a receiver, and the daily digests when their hour
        # (OOTCI_NOTIFY_DIGEST_HOUR) has come: the digest job is this drain.
        "drain-notifications": {
            "task": "ootci.notify.drain",
            "schedule": float(DRAIN_OUTBOX_EVERY_S),
            "options": {"expires": DRAIN_OUTBOX_EVERY_S},
        },
    }
