"""Passwords out of text that is printed or served: ``scheme://user:password@host``
becomes ``scheme://user:***@host`` wherever it appears in a message."""

from __future__ import annotations

import re

_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][\w+.-]*://[^\s/:@]*:)([^\s/@]+)(@)")


def hide_url_passwords(text: str) -> str:
    return _URL_PASSWORD.sub(r"\1***\3", text)
