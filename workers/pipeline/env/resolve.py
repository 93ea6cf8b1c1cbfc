"""Resolve a torch spec to the one artifact it means, before anything is installed.

``pip:``, ``wheel:``, ``nightly[:DATE]`` and ``commit:`` resolve to one wheel (name,
version, URL, sha256): ``provision.py`` keys its virtualenvs by that artifact, so two specs
that resolve to the same wheel share an env and what was resolved is what gets installed.
``commit:<sha>`` reads ``torch/version.py`` out of the candidate wheels themselves (the
index lists versions, not commits), inspecting only nightlies dated near the commit, or a
bounded number of the newest when its date is unknown. The spec's grammar is
the domain's (``service/domain/torch_spec.py``); here a spec that does not parse is the
pipeline's usage error.
"""

from __future__ import annotations

import datetime as dt
import html.parser
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from service.domain import torch_spec
from service.domain.classify import classify_log
from service.domain.torch_spec import (
    DEFAULT_NIGHTLY_INDEX,
    SourceKind,
    TorchSpec,
    TorchSpecError,
    is_url,
    nightly_date_of,
)
from service.domain.verdict import Category, Stage, Subtype
from workers.pipeline.cache.layout import wheel_file
from workers.pipeline.env.digest import sha256_file
from workers.pipeline.errors import PipelineError, ProvisionError, SpecError
from workers.pipeline.isolation.procs import ProcResult, child_env, run_streaming
from workers.pipeline.logs.sink import LogSink

HTTP_TIMEOUT_S = 20
# commit: without a known commit date, how many of the newest nightlies are opened.
COMMIT_SCAN_LIMIT = 14
# A nightly is cut from main once a day: the one built from a commit is dated the day of
# the commit or a few days after (a skipped or failed night).
COMMIT_WINDOW_DAYS = 4
_GIT_VERSION = re.compile(r"""^git_version\s*=\s*['"]([0-9a-fA-F]+)['"]""", re.MULTILINE)
# What the classifier's rules (service/domain/classify/rules.toml, provision stage) call the
# machine's fault in pip's output: the index not reached, the disk full or read-only. Any
# other failure to resolve a requirement is the requirement's.
_MACHINE_FAULTS = frozenset({Subtype.NETWORK, Subtype.DISK})


@dataclass(frozen=True)
class Artifact:
    """The one wheel a pip/wheel/nightly spec resolved to."""

    name: str
    version: str
    url: str
    sha256: str = ""


def parse_spec(
    text: str, *, nightly_index_url: str = DEFAULT_NIGHTLY_INDEX, pip_index_url: str = ""
) -> TorchSpec:
    """The domain's parse, its refusal raised as the pipeline's usage error (exit 2, no run)."""
    try:
        return torch_spec.parse_spec(
            text, nightly_index_url=nightly_index_url, pip_index_url=pip_index_url
        )
    except TorchSpecError as exc:
        raise SpecError(str(exc)) from None


class _Links(html.parser.HTMLParser):
    """Anchors of a PEP 503 project page: (href, text, yanked)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            values = dict(attrs)
            if values.get("href"):
                self.links.append((values["href"] or "", "data-yanked" in values))


def _read_local(url: str) -> str:
    """A file:// index page; a directory is its index.html or, like pip, its file list."""
    path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
    if not path.exists():
        raise SpecError(f"{url}: no such project page (no {path})")
    if path.is_dir():
        if (path / "index.html").is_file():
            return (path / "index.html").read_text(encoding="utf-8", errors="replace")
        names = sorted(p.name for p in path.iterdir() if p.is_file())
        return "".join(f'<a href="{urllib.parse.quote(n)}">{n}</a>\n' for n in names)
    return path.read_text(encoding="utf-8", errors="replace")


def _fetch(url: str) -> str:
    """GET ``url``: network trouble is ProvisionError (infra), fast (one try, short timeout)."""
    if urllib.parse.urlsplit(url).scheme == "file":
        return _read_local(url)
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as resp:  # noqa: S310
            return str(resp.read().decode("utf-8", errors="replace"))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise SpecError(f"{url}: no such project page (HTTP 404)") from None
        raise ProvisionError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ProvisionError(f"package index unreachable: {url}: {reason}") from None


def index_wheels(index_url: str, project: str = "torch") -> list[Artifact]:
    """Every wheel of ``project`` on a PEP 503 index that installs on this Python, newest
    version first (pre-releases included: nightlies are dev versions)."""
    page_url = f"{index_url.rstrip('/')}/{canonicalize_name(project)}/"
    parser = _Links()
    parser.feed(_fetch(page_url))
    supported = set(sys_tags())
    found: list[tuple[object, Artifact]] = []
    for href, yanked in parser.links:
        if yanked:
            continue
        absolute = urllib.parse.urljoin(page_url, href)
        parts = urllib.parse.urlsplit(absolute)
        filename = urllib.parse.unquote(parts.path.rsplit("/", 1)[-1])
        try:
            name, version, _build, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue  # sdists and stray files
        if name != canonicalize_name(project) or not (tags & supported):
            continue
        fragment = urllib.parse.parse_qs(parts.fragment)
        sha256 = fragment.get("sha256", [""])[0]
        url = urllib.parse.urlunsplit(parts._replace(fragment=""))
        found.append((version, Artifact(project, str(version), url, sha256)))
    found.sort(key=lambda pair: pair[0], reverse=True)  # type: ignore[arg-type,return-value]
    return [artifact for _version, artifact in found]


def _no_wheel(project: str, index_url: str) -> ProvisionError:
    return ProvisionError(
        f"no {project} wheel for this Python ({platform.python_version()}, "
        f"{platform.machine()}) on {index_url}"
    )


def newest_on_index(index_url: str, project: str = "torch") -> Artifact:
    """The newest wheel of ``project`` on a PEP 503 index that installs on this Python."""
    wheels = index_wheels(index_url, project)
    if not wheels:
        raise _no_wheel(project, index_url)
    return wheels[0]


def nightly_of_date(index_url: str, date: dt.date) -> Artifact:
    """The nightly dated ``date`` (the newest of that day's builds for this Python)."""
    wheels = index_wheels(index_url)
    for artifact in wheels:
        if nightly_date_of(artifact.version) == date:
            return artifact
    dates = sorted({d for a in wheels if (d := nightly_date_of(a.version)) is not None})
    near = sorted(dates, key=lambda d: abs((d - date).days))[:2]
    hint = f" (nearest: {', '.join(d.isoformat() for d in sorted(near))})" if near else ""
    raise SpecError(f"no nightly of {date.isoformat()} on {index_url}{hint}")


def nightly_dates(index_url: str) -> frozenset[dt.date] | None:
    """The dates of the nightlies on the index that install on this Python (what a
    bisection may probe); None when the index cannot be read now."""
    try:
        wheels = index_wheels(index_url)
    except PipelineError:
        return None
    return frozenset(d for a in wheels if (d := nightly_date_of(a.version)) is not None)


def commit_candidates(
    wheels: list[Artifact], commit_date: dt.date | None, *, limit: int = COMMIT_SCAN_LIMIT
) -> list[Artifact]:
    """The nightlies that may have been built from a commit, in the order to open them:
    those dated within a few days after ``commit_date`` (oldest first: the first nightly
    cut after a commit is the likeliest), or the ``limit`` newest when the date is unknown."""
    dated = [(d, a) for a in wheels if (d := nightly_date_of(a.version)) is not None]
    if commit_date is None:
        return [a for _d, a in dated[:limit]]
    last = commit_date + dt.timedelta(days=COMMIT_WINDOW_DAYS)
    near = [(d, a) for d, a in dated if commit_date <= d <= last]
    return [a for _d, a in sorted(near, key=lambda pair: pair[0])]


def wheel_git_version(path: Path) -> str:
    """``torch.version.git_version`` as the wheel file itself records it ('' if absent)."""
    try:
        with zipfile.ZipFile(path) as archive:
            text = archive.read("torch/version.py").decode("utf-8", errors="replace")
    except (KeyError, zipfile.BadZipFile, OSError):
        return ""
    match = _GIT_VERSION.search(text)
    return match.group(1).lower() if match else ""


def nightly_of_commit(
    index_url: str,
    sha: str,
    cache_dir: Path,
    log: LogSink,
    *,
    commit_date: dt.date | None = None,
    limit: int = COMMIT_SCAN_LIMIT,
) -> Artifact:
    """The nightly whose ``git_version`` is ``sha`` (a prefix of at least 7 digits)."""
    candidates = commit_candidates(index_wheels(index_url), commit_date, limit=limit)
    for candidate in candidates:
        path = fetch_wheel(candidate.url, cache_dir, log, expected_sha256=candidate.sha256)
        git_version = wheel_git_version(path)
        log.write(f"ootci: {candidate.version} was built from {git_version or '(unknown)'}")
        if git_version.startswith(sha.lower()):
            return Artifact(candidate.name, candidate.version, candidate.url, sha256_file(path))
    if commit_date is not None:
        where = f"dated {commit_date.isoformat()} to " + (
            commit_date + dt.timedelta(days=COMMIT_WINDOW_DAYS)
        ).isoformat()
    else:
        where = f"of the {limit} newest"
    raise SpecError(
        f"no nightly on {index_url} was built from commit {sha} "
        f"({len(candidates)} nightlies {where} inspected)"
    )


def _pip_env_for_index(index_url: str) -> dict[str, str]:
    """pip's environment when one index must be the only source: no config files, no
    PIP_* index/find-links variables (machine-wide extras could otherwise supply torch)."""
    env = {
        k: v
        for k, v in child_env({}).items()
        if k not in {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX"}
    }
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


# The machine's pip settings a resolution honours, as pip reads them from the environment
# (a child's HOME is the run's, so the operator's user config is handed over by path).
_MACHINE_PIP_VARS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
                     "PIP_CONSTRAINT", "PIP_CONFIG_FILE", "PIP_TRUSTED_HOST", "PIP_CERT",
                     "PIP_PRE")


def machine_pip_environ(parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """What this machine's own ``pip install torch==X`` would see: its PIP_* variables and
    its user's pip.conf (global ones, /etc/pip.conf and /etc/xdg/pip, pip reads anyway).
    Only those named variables are read out of ``parent`` (the worker's environment)."""
    parent = os.environ if parent is None else parent
    env = {k: parent[k] for k in _MACHINE_PIP_VARS if parent.get(k)}
    if "PIP_CONFIG_FILE" not in env and parent.get("HOME"):
        home = Path(parent["HOME"])
        xdg = Path(parent.get("XDG_CONFIG_HOME") or home / ".config")
        for candidate in (xdg / "pip" / "pip.conf", home / ".pip" / "pip.conf"):
            if candidate.is_file():
                env["PIP_CONFIG_FILE"] = str(candidate)
                break
    return env


_CREDENTIALS = re.compile(r"://[^/@\s]+@")


def _log_pip_settings(env: dict[str, str], cwd: Path, log: LogSink) -> None:
    """The settings (indexes, find-links, constraints) the resolution ran with, in the log."""
    try:
        proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return
    wanted = ("index-url", "find-links", "constraint", "no-index")
    settings = [_CREDENTIALS.sub("://***@", line) for line in proc.stdout.splitlines()
                if any(w in line for w in wanted)]
    log.write("ootci: pip resolved with " + ("; ".join(settings) if settings
                                               else "no index, find-links or constraint settings"))


def _resolve_pip(spec: TorchSpec, log: LogSink) -> Artifact:
    """Ask pip which torch the requirement means, without installing anything: with the
    machine's pip settings (find-links, extra indexes, constraints), unless the spec or
    OOTCI_TORCH_INDEX_URL names the one index to use."""
    if spec.index_url:
        _fetch(f"{spec.index_url}/torch/")  # pip ignores dead indexes silently: fail fast here
    with tempfile.TemporaryDirectory(prefix="ootci-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        # Not --quiet: pip's "conflict is caused by" lines are the reason a user needs.
        # Wheels only: even a dry run prepares an sdist's metadata, running its setup.py
        # as the worker; a torch is installed from a wheel anyway (installer.py).
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
               "--no-deps", "--disable-pip-version-check", "--only-binary=:all:",
               "--report", str(report), spec.requirement]
        env = child_env(machine_pip_environ())
        if spec.index_url:
            cmd += ["--index-url", spec.index_url]
            env = _pip_env_for_index(spec.index_url)
        _log_pip_settings(env, Path(tmp), log)
        first_line = log.lines_written
        result = run_streaming(cmd, cwd=Path(tmp), env=env, log=log, timeout_s=600)
        if result.returncode != 0 or not report.is_file():
            output = log.tail(log.lines_written - first_line)
            raise pip_failure(spec.requirement, output, result, log.path)
        installs = json.loads(report.read_text())["install"]
    item = next((i for i in installs if canonicalize_name(i["metadata"]["name"]) == "torch"), None)
    if item is None:
        # pip resolved fine and chose nothing (an environment marker this Python fails).
        raise SpecError(f"torch requirement {spec.requirement!r} selects no torch for this Python")
    info = item["download_info"]
    return Artifact(
        "torch",
        item["metadata"]["version"],
        info["url"],
        info.get("archive_info", {}).get("hashes", {}).get("sha256", ""),
    )


def pip_failure(
    requirement: str, output: list[str], result: ProcResult, log_path: Path
) -> PipelineError:
    """Why pip could not resolve ``requirement``, from its ``output``: the machine's fault
    (pip killed, or what the classifier finds is the network or the disk) is infra and
    retried; anything else is the requirement's (a usage error)."""
    reasons = [line for line in output if ("ERROR" in line or "error:" in line)
               and "for help visit" not in line]
    finding = classify_log("\n".join(output), Stage.PROVISION)
    machine = (finding is not None and finding.category is Category.INFRA
               and finding.subtype in _MACHINE_FAULTS)
    if result.killed_reason or machine:
        why = result.killed_reason or (reasons[-1] if reasons else f"see {log_path}")
        return ProvisionError(f"pip failed (network or disk) resolving {requirement!r}: {why}")
    reason = "; ".join([*reasons[-3:], *_conflict_causes(output)]) or (
        f"pip exited with {result.returncode}")
    return SpecError(f"torch requirement {requirement!r} does not resolve: {reason}")


def _conflict_causes(output: list[str]) -> list[str]:
    """pip's "The conflict is caused by:" lines (e.g. a machine-wide constraint capping
    torch), which say why, where the ERROR line only says that."""
    causes: list[str] = []
    inside = False
    for line in output:
        text = line.strip()
        if text.startswith("The conflict is caused by"):
            inside = True
        elif inside and (text.startswith("The user requested") or " depends on " in text):
            causes.append(text)
        elif inside and causes and not text:
            break
    return causes


def fetch_wheel(
    location: str, cache_dir: Path, log: LogSink, *, expected_sha256: str = ""
) -> Path:
    """The wheel at a path or URL as a local file: a download is cached under
    ``<cache_dir>/wheels`` by URL. A 404 is the spec's fault; other trouble is infra. With
    ``expected_sha256`` a file with other contents is refused (the index or a recorded run
    said what the bytes must be)."""
    if is_url(location) and not location.startswith("file:"):
        name = urllib.parse.unquote(urllib.parse.urlsplit(location).path.rsplit("/", 1)[-1])
        target = wheel_file(cache_dir, location, name)
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            log.write(f"ootci: downloading {location}")
            partial = target.with_suffix(".part")
            try:
                with (
                    urllib.request.urlopen(location, timeout=HTTP_TIMEOUT_S) as resp,  # noqa: S310
                    partial.open("wb") as out,
                ):
                    shutil.copyfileobj(resp, out, 1 << 20)
            except urllib.error.HTTPError as exc:
                raise (SpecError if exc.code == 404 else ProvisionError)(
                    f"wheel {location}: HTTP {exc.code} {exc.reason}"
                ) from None
            except (urllib.error.URLError, OSError) as exc:
                raise ProvisionError(f"wheel {location}: download failed: {exc}") from None
            partial.rename(target)
        path = target
    else:
        raw = location
        if location.startswith("file:"):
            raw = urllib.request.url2pathname(urllib.parse.urlsplit(location).path)
        path = Path(raw).expanduser().resolve()
        if not path.is_file():
            raise SpecError(f"no wheel file at {path}")
    if expected_sha256 and sha256_file(path) != expected_sha256.lower():
        raise SpecError(
            f"wheel {location}: its sha256 is {sha256_file(path)}, expected {expected_sha256}"
        )
    return path


def _resolve_wheel(spec: TorchSpec, cache_dir: Path, log: LogSink) -> Artifact:
    try:
        path = fetch_wheel(spec.location, cache_dir, log, expected_sha256=spec.sha256)
    except SpecError as exc:
        raise SpecError(f"torch spec {spec.text!r}: {exc}") from None
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise SpecError(f"torch spec {spec.text!r}: {exc}") from None
    if name != "torch":
        raise SpecError(f"torch spec {spec.text!r}: {path.name} is not a torch wheel")
    _check_wheel_archive(spec, path)
    return Artifact("torch", str(version), path.as_uri(), sha256_file(path))


def _check_wheel_archive(spec: TorchSpec, path: Path) -> None:
    """A wheel the user named must be a zip holding its WHEEL metadata: pip failing on a
    broken one later would read as infrastructure and be retried for nothing."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise SpecError(f"torch spec {spec.text!r}: {path.name} is not a valid wheel: {exc}") from None
    if not any(n.endswith(".dist-info/WHEEL") for n in names):
        raise SpecError(f"torch spec {spec.text!r}: {path.name} is not a valid wheel: no .dist-info/WHEEL")


def _with_sha256(artifact: Artifact, cache_dir: Path, log: LogSink) -> Artifact:
    """An index without hashes: the wheel's sha256 from the file, so the run can record
    exactly what it installed."""
    if artifact.sha256:
        return artifact
    path = fetch_wheel(artifact.url, cache_dir, log)
    return Artifact(artifact.name, artifact.version, artifact.url, sha256_file(path))


def resolve(
    spec: TorchSpec, cache_dir: Path, log: LogSink, *, commit_date: dt.date | None = None
) -> Artifact:
    """The wheel a ``pip:``, ``wheel:``, ``nightly[:DATE]`` or ``commit:`` spec means
    (``commit_date``, when known, narrows a ``commit:`` search to the nightlies after it)."""
    if spec.kind == SourceKind.PIP:
        artifact = _resolve_pip(spec, log)
    elif spec.kind == SourceKind.NIGHTLY and spec.nightly_date is not None:
        artifact = _with_sha256(nightly_of_date(spec.index_url, spec.nightly_date), cache_dir, log)
    elif spec.kind == SourceKind.NIGHTLY:
        artifact = _with_sha256(newest_on_index(spec.index_url), cache_dir, log)
    elif spec.kind == SourceKind.COMMIT:
        artifact = nightly_of_commit(
            spec.index_url, spec.commit, cache_dir, log, commit_date=commit_date
        )
    elif spec.kind == SourceKind.WHEEL:
        artifact = _resolve_wheel(spec, cache_dir, log)
    else:
        raise SpecError(f"torch spec {spec.text!r}: a {spec.kind} spec has no artifact")
    log.write(f"ootci: {spec.text!r} resolved to torch {artifact.version} from {artifact.url}"
              + (" (a local file: find-links or a file index)" if artifact.url.startswith("file:")
                 else ""))
    return artifact
