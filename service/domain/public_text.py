"""Text ootci publishes outside (a commit status's description, a PR comment's lines) without
what only the inside should see: the worker's file system paths and internal hosts.

A run's error or a failure line names where the worker keeps things
(``/var/lib/ootci/work/run-7/...``) and the addresses it fetched from (a wheel mirror at
``http://10.0.3.4/...``). On GitHub those map the deployment for anyone reading the PR. A
path keeps its last component (``.../foo.cpp:12``: still says which file), an internal URL
becomes ``<internal>``; URLs on public hosts and on the dashboard's own host stay.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse

_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>)\]]+")
# An absolute path of two or more components, not part of a URL or a relative path.
_PATH = re.compile(r"(?<![\w.:/~-])(?:~|/)(?:[\w.@+~-]+/)+[\w.@+~-]*")
_INTERNAL_SUFFIXES = (".internal", ".local", ".localdomain", ".lan", ".svc", ".cluster.local",
                      ".home", ".corp", ".intranet")
_PLACEHOLDER = "\x00{}\x00"


def internal_host(host: str) -> bool:
    """A host only the deployment's own network reaches (or names)."""
    host = host.lower().rstrip(".")
    try:
        return not ipaddress.ip_address(host).is_global
    except ValueError:
        pass
    return "." not in host or host == "localhost" or host.endswith(_INTERNAL_SUFFIXES)


def public_text(text: str, public_url: str = "") -> str:
    """``text`` with file system paths cut to their last component and internal URLs
    replaced; links to ``public_url``'s host kept."""
    public_host = (urllib.parse.urlsplit(public_url).hostname or "").lower() if public_url else ""
    kept: list[str] = []

    def url(match: re.Match[str]) -> str:
        found = match.group(0).rstrip(".,;:!?")  # the sentence's punctuation, not the URL's
        tail = match.group(0)[len(found):]
        try:
            host = (urllib.parse.urlsplit(found).hostname or "").lower()
        except ValueError:
            host = ""
        if found.lower().startswith("file:") or not host or (
            host != public_host and internal_host(host)
        ):
            return "<internal>" + tail
        kept.append(found)
        return _PLACEHOLDER.format(len(kept) - 1) + tail

    def path(match: re.Match[str]) -> str:
        last = match.group(0).rstrip("/").rsplit("/", 1)[-1]
        return f".../{last}" if last else "..."

    masked = _PATH.sub(path, _URL.sub(url, text))
    for i, original in enumerate(kept):
        masked = masked.replace(_PLACEHOLDER.format(i), original)
    return masked
