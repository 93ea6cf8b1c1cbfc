"""Schemathesis hooks (loaded by scripts/schemathesis.sh through SCHEMATHESIS_HOOKS).

Unsigned fuzz input never gets past the webhook's signature check, so the routing behind
it would go untested. This hook makes every generated webhook call a *signed* delivery:
a captured GitHub payload with the generated object laid over it (top level and inside
``pull_request``), the matching ``X-GitHub-Event``, a fresh delivery id and a correct
``X-Hub-Signature-256`` over the exact bytes sent.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import uuid
from pathlib import Path
from typing import Any

import schemathesis

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "webhooks"
EVENTS = {
    "pull_request_labeled.json": "pull_request",
    "pull_request_labeled_other.json": "pull_request",
    "pull_request_synchronize.json": "pull_request",
    "push_upstream_main.json": "push",
    "push_backend.json": "push",
    "repository_dispatch_pull_request.json": "repository_dispatch",
    "ping.json": "ping",
    "issues_opened.json": "issues",
}
PAYLOADS = {name: json.loads((FIXTURES / name).read_text()) for name in EVENTS}


def _negative(case: Any) -> bool:
    meta = getattr(case, "_meta", None)
    if meta is None:
        return False
    modes = [meta.generation.mode, *(c.mode for c in meta.components.values())]
    return any(str(mode) == "negative" for mode in modes)


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
    if case.path != "/webhooks/github" or case.method.upper() != "POST":
        return
    if _negative(case):
        return  # schema-violating on purpose: it must be refused as generated, not repaired
    generated = case.body if isinstance(case.body, dict) else {}
    names = sorted(EVENTS)
    name = names[len(json.dumps(generated, default=str)) % len(names)]
    payload = json.loads(json.dumps(PAYLOADS[name]))
    payload.update(generated)
    if isinstance(payload.get("pull_request"), dict):
        payload["pull_request"].update(generated)
    raw = json.dumps(payload, default=str).encode()
    secret = os.environ["OOTCI_WEBHOOK_SECRET"].encode()
    case.body = raw
    # Only the operation's own headers: after this edit schemathesis re-validates the case
    # against the header schema, where the CLI's Authorization header is not declared.
    ours = {"x-github-event", "x-github-delivery", "x-hub-signature-256", "authorization"}
    kept = {k: v for k, v in (case.headers or {}).items() if k.lower() not in ours}
    case.headers = {
        **kept,
        # Spelled as the schema names them (lower case), so the case still validates.
        "x-github-event": EVENTS[name],
        "x-github-delivery": str(uuid.uuid4()),
        "x-hub-signature-256": "sha256=" + hmac.new(secret, raw, hashlib.sha256).hexdigest(),
    }
