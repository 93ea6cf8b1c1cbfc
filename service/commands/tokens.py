"""Named API tokens: made (shown once), listed, revoked; each change audited.

A token is ``ootci_`` + 43 url-safe characters (256 random bits); only its sha256 is kept.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.audit import audit
from service.domain.roles import Role
from service.models import ApiToken, utcnow

TOKEN_PREFIX = "ootci_"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}")


class TokenError(ValueError):
    """Bad input for a token command; the message is one line for the user."""


@dataclass(frozen=True)
class NewToken:
    name: str
    role: Role
    secret: str  # the token itself: shown once, never stored


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def add_token(session: Session, name: str, role: str, *, actor: str) -> NewToken:
    if not NAME_PATTERN.fullmatch(name):
        raise TokenError(f"bad token name {name!r}: letters, digits, '_.@-', at most 100")
    try:
        parsed = Role.parse(role)
    except ValueError as exc:
        raise TokenError(str(exc)) from None
    if session.scalar(select(ApiToken.id).where(ApiToken.name == name)) is not None:
        raise TokenError(f"a token named {name!r} exists (revoked ones keep their name)")
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(name=name, role=parsed.value, token_sha256=token_digest(secret),
                         created_by=actor))
    audit(session, actor, "token.add", f"token:{name}", {"role": parsed.value})
    return NewToken(name, parsed, secret)


def revoke_token(session: Session, name: str, *, actor: str) -> None:
    token = session.scalar(select(ApiToken).where(ApiToken.name == name))
    if token is None:
        raise TokenError(f"no token named {name!r}")
    if token.revoked_at is not None:
        raise TokenError(f"token {name!r} is already revoked")
    token.revoked_at = utcnow()
    audit(session, actor, "token.revoke", f"token:{name}", {"role": token.role})
