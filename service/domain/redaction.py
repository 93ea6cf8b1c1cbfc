"""Secrets out of text that is printed, stored or served.

``hide_url_passwords``: ``scheme://user:password@host`` becomes ``scheme://user:***@host``
wherever it appears in a message. ``SecretMasker``: that, plus every known secret value
(and its URL-quoted form) replaced by ``***``. Pure: which secrets a process holds is
``service.secrets``'s business.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, unquote, urlsplit

MASK = "***"
# A shorter secret would mask ordinary words; such secrets are still caught inside URLs.
_MIN_SECRET_LEN = 4
# Names whose whole value is a secret.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE_KEY|API_KEY", re.IGNORECASE)
# scheme://user:password@host: the password, whatever URL it is in.
_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][\w+.-]*://[^\s/:@]*:)([^\s/@]+)(@)")


def hide_url_passwords(text: str) -> str:
    # Most text holds no URL: skip the regex, which tries a scheme at every word.
    return _URL_PASSWORD.sub(rf"\1{MASK}\3", text) if "://" in text else text


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
        if SECRET_NAME.search(name):
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

    def __call__(self, text: str) -> str:
        if self._pattern is not None:
            text = self._pattern.sub(MASK, text)
        return hide_url_passwords(text)
