"""Who may speak for whom in a webhook delivery.

``repository_dispatch`` carries another event inside it (PyTorch's cross-repository relay
forwards upstream PRs that way); anyone with write access to *any* repository whose hook
points here can send one. It is trusted only from the repositories the operator lists
(``OOTCI_RELAY_REPOSITORIES``). A delivery signed with a repository's own secret
(``OOTCI_WEBHOOK_SECRETS``) speaks only for that repository.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from service.config import Settings

ANY_REPOSITORY = "*"


def signature_matches(secret: bytes, body: bytes, header: str | None) -> bool:
    if not secret or not header or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.encode("utf-8", "replace"))


def signer(settings: Settings, body: bytes, header: str | None) -> str | None:
    """Whose secret signed ``body``: ``ANY_REPOSITORY`` for the shared secret, a repository
    name for its own secret, None when none matches. Every secret is tried (constant-time
    compares), so the answer's timing does not say which secret came close."""
    candidates = [(ANY_REPOSITORY, settings.webhook_secret.get_secret_value())]
    candidates += [(repo, s.get_secret_value()) for repo, s in settings.webhook_secrets.items()]
    found: str | None = None
    for owner, secret in candidates:
        if signature_matches(secret.encode(), body, header) and found is None:
            found = owner
    return found


def sender_repository(payload: Mapping[str, Any]) -> str:
    repository = payload.get("repository")
    name = repository.get("full_name") if isinstance(repository, Mapping) else None
    return name if isinstance(name, str) else ""


def refusal(settings: Settings, event: str, payload: Mapping[str, Any], signed_by: str) -> str | None:
    """Why this authenticated delivery may not be routed, or None."""
    repo = sender_repository(payload)
    if signed_by != ANY_REPOSITORY and repo.lower() != signed_by.lower():
        return f"signed with {signed_by}'s secret but sent for repository {repo!r}"
    if event == "repository_dispatch":
        relays = {r.lower() for r in settings.relay_repositories}
        if repo.lower() not in relays:
            return (
                f"repository_dispatch from {repo!r}, which is not in OOTCI_RELAY_REPOSITORIES: "
                "relayed events are trusted only from the listed repositories"
            )
    return None
