"""ootci's secrets: read once at start, then gone from the process's environment; and the
one mask every stored string passes.

Both live here because what the storage mask must hide is exactly what this process
holds: the secret settings it read at start, those of any ``Settings`` it loaded or was
given (``remember``), and every password inside a URL.

**Reading** (:func:`load_and_scrub`, called first by every entry point: the ``ootci``
CLI, ``app_factory`` under uvicorn, Celery's ``worker_init``/``beat_init``). Each secret
setting comes from ``OOTCI_<NAME>_FILE`` (the file's content, stripped: Docker and
Kubernetes secrets), preferred, or from ``OOTCI_<NAME>``. A ``_FILE`` that cannot be read
is a :class:`SecretsError`: one line, and the entry point exits 2. The values are held
in this module; :func:`held_settings` hands them to ``service.config.load_settings``.

**Scrubbing.** ``os.environ`` edits do not change ``/proc/<pid>/environ``: the kernel
shows the process's *initial* environment block (``env_start``..``env_end`` of its memory
map), read from live memory at each read. So, after ``unsetenv`` (libc's ``environ`` no
longer points into them), the values are overwritten in place in that block with NULs.
A re-exec with a scrubbed environment would also work, but needs a side channel for the
values and changes the pid under process managers; the overwrite keeps the pid and costs
microseconds. Then the process is made non-dumpable (``PR_SET_DUMPABLE 0``): its memory,
heap copies of the values included, is unreadable (ptrace, ``/proc/<pid>/mem``,
``environ``: its ``/proc`` files turn root's) to another process of its uid, when that uid
is not root; a root reader (a root worker's build, even without capabilities) still reads
``environ``, and finds it blank. Other credential-named variables (not ootci's settings)
stay in the environment for the tools ootci runs itself (git, pip), protected by the flag
alone, and are masked. Forked children
(Celery's prefork pool) inherit the scrubbed block, the flag and the held values; exec'd
children (builds) get the scrubbed environment and are dumpable again (exec resets the
flag): they never held a secret. ``*_FILE`` variables stay: a path is no secret, and an
exec'd ootci child (a uvicorn worker) reads the files again. The window left: from exec
until the entry point runs (Python's start and imports), the block holds the values;
``*_FILE`` has no window at all.

**Masking at storage** (:func:`storage_mask`, :func:`mask_json`): called by the column
types of ``service.models.masked``, i.e. at SQLAlchemy's bind of every column that may
carry text from a run, for ORM flushes and Core inserts and updates alike.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import sys
from collections.abc import Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from service.domain.redaction import SecretMasker, secrets_in_environ, url_password

# Environment variable -> the Settings field it fills.
SECRET_SETTINGS: dict[str, str] = {
    "OOTCI_DATABASE_URL": "database_url",
    "OOTCI_BROKER_URL": "broker_url",
    "OOTCI_RESULT_BACKEND": "result_backend",
    "OOTCI_API_TOKEN": "api_token",
    "OOTCI_WEBHOOK_SECRET": "webhook_secret",
    "OOTCI_WEBHOOK_SECRETS": "webhook_secrets",
    "OOTCI_GITHUB_TOKEN": "github_token",
}
URL_SETTINGS = frozenset({"database_url", "broker_url", "result_backend"})
FILE_SUFFIX = "_FILE"
_PR_SET_DUMPABLE = 4
_MIN_ENVIRON_SECRET_LEN = 8

_held: dict[str, str] = {}
_known: set[str] = set()
_mask: SecretMasker | None = None


class SecretsError(RuntimeError):
    """A secret could not be read (a ``*_FILE`` that is missing or unreadable)."""


def read_secrets(environ: MutableMapping[str, str]) -> dict[str, str]:
    """Settings field -> value for every secret setting given, ``*_FILE`` first."""
    found = {}
    for name, field in SECRET_SETTINGS.items():
        path = environ.get(name + FILE_SUFFIX)
        if path:
            try:
                found[field] = Path(path).read_text().strip()
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise SecretsError(f"{name}{FILE_SUFFIX}={path}: cannot read it: {reason}") from None
        elif name in environ:
            found[field] = environ[name]
    return found


def load_and_scrub(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Read the secrets, remove them from the environment (``os.environ``, libc's and the
    initial block ``/proc/<pid>/environ`` shows) and make the process non-dumpable; other
    credential-named variables join the storage mask. Safe to
    call again: values already held stay held. Returns the names removed."""
    environ = os.environ if environ is None else environ
    _held.update(read_secrets(environ))
    for field, value in _held.items():
        # A URL is masked by its password only: the rest names a host, not a secret.
        if field in URL_SETTINGS:
            remember(url_password(value) or "")
        elif field == "webhook_secrets":
            remember(*_webhook_secret_values(value))
        else:
            remember(value)
    # Other credential-like variables are masked but stay: git or pip run by ootci itself
    # may need them (builds never get them: service.config's refusal list), and the
    # non-dumpable flag keeps them from processes of the same uid.
    remember_environ(environ)
    doomed = [n for n in environ if n in SECRET_SETTINGS]
    for name in doomed:
        del environ[name]
    if environ is os.environ:
        blank_initial_environ(set(doomed))
        make_nondumpable()
    return sorted(doomed)


def held_settings() -> dict[str, Any]:
    """The held secrets as ``Settings`` keyword arguments (they outrank the environment)."""
    held: dict[str, Any] = dict(_held)
    if "webhook_secrets" in held:
        # Invalid JSON is left as text: the settings' validation names the variable.
        with contextlib.suppress(ValueError):
            held["webhook_secrets"] = json.loads(held["webhook_secrets"])
    return held


def remember(*values: str) -> None:
    """Add secrets the storage mask hides (a URL value: its password only)."""
    global _mask
    for value in values:
        password = url_password(value)
        new = password if password is not None else value
        if new and new not in _known:
            _known.add(new)
            _mask = None


def remember_environ(environ: Mapping[str, str]) -> None:
    """The credential-named variables of ``environ`` and the passwords in its URLs. A
    value shorter than a credential (a flag such as ``HF_HUB_DISABLE_TOKEN=true``) would
    mask ordinary words in everything stored: only from 8 characters."""
    for value in secrets_in_environ(
        {n: v for n, v in environ.items() if not n.endswith(FILE_SUFFIX)}
    ):
        if len(value) >= _MIN_ENVIRON_SECRET_LEN:
            remember(value)


def known() -> frozenset[str]:
    return frozenset(_known)


def forget() -> None:
    """Drop every held and known secret (tests: one process plays many deployments)."""
    global _mask
    _held.clear()
    _known.clear()
    _mask = None


def storage_mask(text: str) -> str:
    """``text`` as it may be stored or served: known secrets and URL passwords hidden."""
    global _mask
    mask = _mask
    if mask is None:
        # Built once per change of what is known, not per value written.
        mask = _mask = SecretMasker(frozenset(_known))
    return mask(text)


def mask_json(value: Any) -> Any:
    """Every string inside a JSON document masked (keys included)."""
    if isinstance(value, str):
        return storage_mask(value)
    if isinstance(value, dict):
        return {mask_json(k): mask_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask_json(v) for v in value]
    return value


def _webhook_secret_values(text: str) -> Iterable[str]:
    try:
        table = json.loads(text) if text else {}
    except ValueError:
        return []
    return [v for v in table.values() if isinstance(v, str)] if isinstance(table, dict) else []


def make_nondumpable() -> bool:
    """``PR_SET_DUMPABLE 0``: this process's memory and ``/proc/<pid>/environ`` are
    unreadable to other processes of its uid. Inherited by fork, reset by exec."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)


def blank_initial_environ(names: set[str]) -> int:
    """Overwrite with NULs the values of ``names`` in the initial environment block, the
    memory ``/proc/<pid>/environ`` reads. Returns how many entries were blanked."""
    if not names or not sys.platform.startswith("linux"):
        return 0
    start, end = _environ_block()
    if not start or end <= start:
        return 0
    block = ctypes.string_at(start, end - start)
    wanted = {n.encode() for n in names}
    blanked, offset = 0, 0
    for entry in block.split(b"\0"):
        name, eq, value = entry.partition(b"=")
        if eq and name in wanted and value:
            ctypes.memset(start + offset + len(name) + 1, 0, len(value))
            blanked += 1
        offset += len(entry) + 1
    return blanked


def _environ_block() -> tuple[int, int]:
    # proc(5): fields 50 and 51 of /proc/<pid>/stat are env_start and env_end. The command
    # name (field 2) may hold spaces and parens: count from the last ')'.
    stat = Path("/proc/self/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[47]), int(fields[48])
