"""Masking secret values in stored logs.

Builds and tests never receive ootci's secrets (``child_env``), so a secret in a log means
a leak we did not foresee: a worker path that prints a URL, a tool that echoes its proxy
with credentials. This is the second line: every line is masked before it is written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote, urlsplit

from service.config import Settings

MASK = "***"
# A shorter secret would mask ordinary words; such secrets are still caught inside URLs.
_MIN_SECRET_LEN = 4
# Names whose whole value is a secret.
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE_KEY|API_KEY", re.IGNORECASE)
# scheme://user:password@host: the password, whatever URL it is in.
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][\w+.-]*://[^\s/:@]*:)([^\s/@]+)(@)")


def url_password(value: str) -> str | None:
    """The password inside a URL such as ``postgresql://ootci:pw@db/ootci``, else None."""
    if "://" not in value:
        return None
    try:
        password = urlsplit(value.strip()).password
    except ValueError:
        return None
    return unquote(password) if password else None


def secrets_in_environ(environ: Mapping[str, str]) -> list[str]:
    """The values of credential-like variables and the passwords inside URL values."""
    found = []
    for name, value in environ.items():
        if _SECRET_NAME.search(name):
            found.append(value)
        password = url_password(value)
        if password is not None:
            found.append(password)
    return found


class SecretMasker:
    """Replaces known secret values (and any URL password) in text with ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        variants = set()
        for secret in secrets:
            secret = secret.strip()
            if len(secret) >= _MIN_SECRET_LEN:
                variants.update({secret, quote(secret, safe="")})
        # Longest first: a secret containing another is masked whole.
        self._pattern = (
            re.compile("|".join(re.escape(s) for s in sorted(variants, key=len, reverse=True)))
            if variants
            else None
        )

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], extra: Iterable[str] = ()) -> SecretMasker:
        return cls([*secrets_in_environ(environ), *extra])

    @classmethod
    def for_settings(cls, settings: Settings) -> SecretMasker:
        """What a worker masks: the secrets in its environment and in its settings."""
        return cls.from_environ(os.environ, extra=settings_secrets(settings))

    def __call__(self, text: str) -> str:
        if self._pattern is not None:
            text = self._pattern.sub(MASK, text)
        return _URL_PASSWORD.sub(rf"\1{MASK}\3", text)


def settings_secrets(settings: Settings) -> list[str]:
    """ootci's own secrets as the worker loaded them (an ``.env`` file is not in the
    environment, so these are not found by :func:`secrets_in_environ`)."""
    found = [
        s.get_secret_value()
        for s in (settings.api_token, settings.webhook_secret, settings.github_token)
    ]
    for url in (settings.database_url, settings.broker_url, settings.result_backend):
        password = url_password(url)
        if password is not None:
            found.append(password)
    return found
