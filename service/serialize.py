"""One machine-readable shape of a run, shared by ``ootci ... --json`` and the API."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from service.models import Failure, Run, Step


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def step_to_dict(step: Step) -> dict[str, Any]:
    return {
        "name": step.name,
        "status": step.status,
        "started_at": _iso(step.started_at),
        "finished_at": _iso(step.finished_at),
        "duration_s": step.duration_s,
        "exit_code": step.exit_code,
        "summary": step.summary,
        "log_size": step.log_size,
    }


def failure_to_dict(failure: Failure) -> dict[str, Any]:
    finding = failure.finding or {}
    return {
        "id": failure.id,
        "step": failure.step_name,
        "stage": failure.stage,
        "nodeid": failure.nodeid,
        "category": failure.category,
        "subtype": failure.subtype,
        "rule": failure.rule,
        "line": failure.line,
        "line_number": failure.line_no,
        "captures": failure.captures,
        "explanation": finding.get("explanation"),
        "context_before": finding.get("context_before", []),
        "context_after": finding.get("context_after", []),
        "fingerprint": failure.fingerprint,
        "fingerprint_version": failure.fingerprint_version,
        "triage": failure.triage,
        "triage_reason": failure.triage_reason,
        "breakage_id": failure.breakage_id,
    }


def run_to_dict(run: Run, *, backend_name: str | None = None, details: bool = True) -> dict[str, Any]:
    tb = run.torch_build
    data: dict[str, Any] = {
        "id": run.id,
        "state": run.state,
        "backend": backend_name,
        "backend_sha": run.backend_sha,
        "torch": {
            "spec": run.torch_spec,
            "version": tb.version if tb else None,
            "git_version": tb.git_version if tb else None,
        },
        "trigger": run.trigger,
        "trigger_info": run.trigger_info,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration_s": run.duration_s,
        "error": run.error,
        "verdict": {
            "category": run.verdict,
            "subtype": run.verdict_subtype,
            "reason": run.verdict_reason,
        },
    }
    if details:
        data["steps"] = [step_to_dict(s) for s in run.steps]
        data["tests"] = dict(Counter(t.outcome for t in run.test_results))
        data["failures"] = [failure_to_dict(f) for f in run.failures]
    return data
