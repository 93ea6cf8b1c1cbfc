"""The torch spec: which PyTorch a run tests, as the user writes it. One grammar, used by the
CLI and the API to refuse a bad spec before a run exists, and by the pipeline to provision.

- ``installed``                 the interpreter running ootci, as it is
- ``pip:<requirement>``         e.g. ``pip:torch==2.13.0``; an index may follow ``@@``:
  ``pip:torch==2.14.0@@https://download.pytorch.org/whl/cpu`` (``@@`` because PEP 508
  requirements may themselves contain ``@``)
- ``wheel:<path|url>``          one torch wheel file
- ``path:<dir>``                ``<dir>/torch`` put first on PYTHONPATH (patched overlays)
- ``nightly``                   the newest torch on the nightly index that fits this Python
- ``nightly:YYYY-MM-DD``        the nightly of that date (nightly versions carry it: ``.devYYYYMMDD``)
- ``commit:<sha>``              the nightly built from that upstream commit (its ``git_version``)
- ``run:<id>``                  exactly the wheel run ``<id>`` was provisioned with (its URL and sha256)

``nightly`` is a moving target; the other forms pin upstream and reproduce the same wheel
every time they are resolved (``run:`` through the artifact the run recorded).

Parsing checks the form only: whether the requirement resolves, the wheel exists or the dir
holds a torch is the pipeline's to find out (``workers/pipeline/env/resolve.py``).
"""

from __future__ import annotations

import datetime as dt
import enum
import re
import urllib.parse
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

DEFAULT_NIGHTLY_INDEX = "https://download.pytorch.org/whl/nightly/cpu"
INDEX_SEPARATOR = "@@"
# No square brackets in these: they end up in messages that terminals render as markup.
SPEC_FORMS = (
    "installed",
    "pip:<requirement>",
    f"pip:<requirement>{INDEX_SEPARATOR}<index-url>",
    "wheel:<path|url>",
    "path:<dir>",
    "nightly",
    "nightly:YYYY-MM-DD",
    "commit:<sha>",
    "run:<id>",
)
_SHA = re.compile(r"[0-9a-f]{7,40}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class SourceKind(enum.StrEnum):
    """Where a spec's torch comes from: the part before the colon."""

    INSTALLED = "installed"
    PIP = "pip"
    WHEEL = "wheel"
    PATH = "path"
    NIGHTLY = "nightly"
    COMMIT = "commit"
    RUN = "run"


class TorchSpecError(ValueError):
    """A torch spec that does not parse; the message names the problem and the forms."""


@dataclass(frozen=True)
class TorchSpec:
    text: str  # as the user wrote it
    kind: SourceKind
    requirement: str = ""  # pip: the PEP 508 requirement
    index_url: str = ""  # pip: the index to resolve torch on; nightly: the nightly index
    location: str = ""  # wheel: path or URL; path: the overlay dir
    nightly_date: dt.date | None = None  # nightly:DATE
    commit: str = ""  # commit: the upstream sha (lower case, 7 to 40 hex digits)
    run_id: int = 0  # run: the run whose torch is reused
    # wheel: the sha256 the file must have (a run: spec pinned to its recorded artifact).
    sha256: str = ""

    @property
    def pins_upstream(self) -> bool:
        """True when resolving the spec again gives the same torch (everything but the
        moving ``nightly`` and the machine's ``installed``)."""
        if self.kind is SourceKind.NIGHTLY:
            return self.nightly_date is not None
        return self.kind is not SourceKind.INSTALLED


def is_url(text: str) -> bool:
    return urllib.parse.urlsplit(text).scheme in {"http", "https", "file"}


def _check_index(url: str, spec: str) -> str:
    if not is_url(url):
        raise TorchSpecError(
            f"torch spec {spec!r}: index {url!r} is not an http(s):// or file:// URL"
        )
    return url.rstrip("/")


def _parse_date(text: str, spec: str) -> dt.date:
    if not _DATE.fullmatch(text):
        raise TorchSpecError(f"torch spec {spec!r}: nightly: takes a date, YYYY-MM-DD")
    try:
        return dt.date.fromisoformat(text)
    except ValueError as exc:
        raise TorchSpecError(f"torch spec {spec!r}: {exc}") from None


def nightly_date_of(version: str) -> dt.date | None:
    """The date a nightly version carries (``2.14.0.dev20261120+cpu`` -> 2026-11-20)."""
    match = re.search(r"\.dev(\d{8})(?:\D|$)", version)
    if match is None:
        return None
    try:
        return dt.datetime.strptime(match.group(1), "%Y%m%d").date()
    except ValueError:
        return None


def parse_spec(
    text: str, *, nightly_index_url: str = DEFAULT_NIGHTLY_INDEX, pip_index_url: str = ""
) -> TorchSpec:
    """``text`` as a TorchSpec; ``nightly`` and an index-less ``pip:`` take the given indexes."""
    text = text.strip()
    expected = "expected one of " + ", ".join(SPEC_FORMS)
    if not text:
        raise TorchSpecError(f"empty torch spec: {expected}")
    kind, colon, rest = text.partition(":")
    rest = rest.strip()
    if kind == SourceKind.NIGHTLY and colon:
        return TorchSpec(
            text,
            SourceKind.NIGHTLY,
            "torch",
            _check_index(nightly_index_url, text),
            nightly_date=_parse_date(rest, text),
        )
    if kind == SourceKind.COMMIT:
        sha = rest.lower()
        if not _SHA.fullmatch(sha):
            raise TorchSpecError(
                f"torch spec {text!r}: commit: takes an upstream sha (7 to 40 hex digits)"
            )
        return TorchSpec(
            text, SourceKind.COMMIT, "torch", _check_index(nightly_index_url, text), commit=sha
        )
    if kind == SourceKind.RUN:
        if not rest.isdigit() or int(rest) < 1:
            raise TorchSpecError(f"torch spec {text!r}: run: takes a run id (a positive integer)")
        return TorchSpec(text, SourceKind.RUN, run_id=int(rest))
    if kind in {SourceKind.INSTALLED, SourceKind.NIGHTLY}:
        if colon:
            raise TorchSpecError(f"torch spec {text!r}: {kind!r} takes no argument")
        if kind == SourceKind.INSTALLED:
            return TorchSpec(text, SourceKind.INSTALLED)
        return TorchSpec(
            text, SourceKind.NIGHTLY, "torch", _check_index(nightly_index_url, text)
        )
    if kind not in {SourceKind.PIP, SourceKind.WHEEL, SourceKind.PATH}:
        raise TorchSpecError(f"unknown torch spec kind {kind!r}: {expected}")
    if not colon or not rest:
        raise TorchSpecError(f"torch spec {text!r}: {kind}: needs an argument ({expected})")
    if kind == SourceKind.PIP:
        requirement, sep, index = rest.partition(INDEX_SEPARATOR)
        requirement = requirement.strip()
        try:
            parsed = Requirement(requirement)
        except InvalidRequirement as exc:
            raise TorchSpecError(f"torch spec {text!r}: not a pip requirement: {exc}") from None
        if canonicalize_name(parsed.name) != "torch":
            raise TorchSpecError(f"torch spec {text!r}: the requirement must be for torch")
        index = index.strip() if sep else pip_index_url
        if sep and not index:
            raise TorchSpecError(f"torch spec {text!r}: nothing after {INDEX_SEPARATOR}")
        return TorchSpec(
            text, SourceKind.PIP, requirement, _check_index(index, text) if index else ""
        )
    if kind == SourceKind.WHEEL:
        scheme = urllib.parse.urlsplit(rest).scheme
        if "://" in rest and not is_url(rest):
            raise TorchSpecError(
                f"torch spec {text!r}: {scheme}:// is not supported; a wheel is a path, or an "
                "http(s):// or file:// URL"
            )
        if not urllib.parse.urlsplit(rest).path.endswith(".whl"):
            raise TorchSpecError(f"torch spec {text!r}: a wheel file name ends in .whl")
        return TorchSpec(text, SourceKind.WHEEL, location=rest)
    return TorchSpec(text, SourceKind.PATH, location=rest)
