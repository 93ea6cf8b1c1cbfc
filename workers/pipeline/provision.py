"""Torch targets: parse a torch spec, provision an environment that imports that torch.

Spec syntax (``parse_spec``):

- ``installed``                 the interpreter running ootci, as it is
- ``pip:<requirement>``         e.g. ``pip:torch==2.13.0``; an index may follow ``@@``:
  ``pip:torch==2.14.0@@https://download.pytorch.org/whl/cpu`` (``@@`` because PEP 508
  requirements may themselves contain ``@``)
- ``wheel:<path|url>``          one torch wheel file
- ``path:<dir>``                ``<dir>/torch`` put first on PYTHONPATH (patched overlays),
  in a thin venv of its own over ootci's packages, keyed by the tree's file stats
- ``nightly``                   the newest torch on the nightly index that fits this Python

``pip:``, ``wheel:`` and ``nightly`` first resolve to one artifact (name, version, URL,
sha256) and get a virtualenv keyed by that artifact and the Python it runs on, under
``<cache_dir>/envs/<key>``: two specs that resolve to the same wheel share it, and a second
provision of a spec is a lookup. The env's torch is installed from the resolved URL itself,
so what was resolved is what gets installed.
"""

from __future__ import annotations

import fcntl
import hashlib
import html.parser
import json
import os
import platform
import shutil
import site
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from workers.pipeline.cache_gc import stamp
from workers.pipeline.logsink import LogSink
from workers.pipeline.procs import child_env, run_streaming
from workers.pipeline.types import ProvisionError, SpecError, TorchEnv

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
)
# What every backend suite can count on besides torch.
TEST_TOOLS = ("numpy", "expecttest", "pytest", "pytest-timeout")
# Backends build with `pip install --no-build-isolation` against the env's torch, so the
# build backend itself must already be there.
BUILD_TOOLS = ("setuptools", "wheel")
MARKER = "ootci-env.json"
HTTP_TIMEOUT_S = 20
PIP_TIMEOUT_S = 3600
# pip prints these when the network or the disk, not the requirement, is the problem.
_INFRA_SIGNATURES = (
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Connection refused",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "SSLError",
    "ProxyError",
    "No space left on device",
    "Read-only file system",
)
_PROBE = (
    "import json, torch; print('OOTCI_TORCH=' + json.dumps({'version': torch.__version__, "
    "'git_version': getattr(torch.version, 'git_version', ''), 'file': torch.__file__}))"
)


@dataclass(frozen=True)
class TorchSpec:
    text: str  # as the user wrote it
    kind: str  # service.models.SourceKind value
    requirement: str = ""  # pip: the PEP 508 requirement
    index_url: str = ""  # pip: the index to resolve torch on; nightly: the nightly index
    location: str = ""  # wheel: path or URL; path: the overlay dir


@dataclass(frozen=True)
class Artifact:
    """The one wheel a pip/wheel/nightly spec resolved to."""

    name: str
    version: str
    url: str
    sha256: str = ""


# ---------------------------------------------------------------------------- parsing
def _is_url(text: str) -> bool:
    return urllib.parse.urlsplit(text).scheme in {"http", "https", "file"}


def _check_index(url: str, spec: str) -> str:
    if not _is_url(url):
        raise SpecError(f"torch spec {spec!r}: index {url!r} is not an http(s):// or file:// URL")
    return url.rstrip("/")


def parse_spec(
    text: str, *, nightly_index_url: str = DEFAULT_NIGHTLY_INDEX, pip_index_url: str = ""
) -> TorchSpec:
    text = text.strip()
    expected = "expected one of " + ", ".join(SPEC_FORMS)
    if not text:
        raise SpecError(f"empty torch spec: {expected}")
    kind, colon, rest = text.partition(":")
    rest = rest.strip()
    if kind in {"installed", "nightly"}:
        if colon:
            raise SpecError(f"torch spec {text!r}: {kind!r} takes no argument")
        if kind == "installed":
            return TorchSpec(text, "installed")
        return TorchSpec(text, "nightly", "torch", _check_index(nightly_index_url, text))
    if kind not in {"pip", "wheel", "path"}:
        raise SpecError(f"unknown torch spec kind {kind!r}: {expected}")
    if not colon or not rest:
        raise SpecError(f"torch spec {text!r}: {kind}: needs an argument ({expected})")
    if kind == "pip":
        requirement, sep, index = rest.partition(INDEX_SEPARATOR)
        requirement = requirement.strip()
        try:
            parsed = Requirement(requirement)
        except InvalidRequirement as exc:
            raise SpecError(f"torch spec {text!r}: not a pip requirement: {exc}") from None
        if canonicalize_name(parsed.name) != "torch":
            raise SpecError(f"torch spec {text!r}: the requirement must be for torch")
        index = index.strip() if sep else pip_index_url
        if sep and not index:
            raise SpecError(f"torch spec {text!r}: nothing after {INDEX_SEPARATOR}")
        return TorchSpec(text, "pip", requirement, _check_index(index, text) if index else "")
    if kind == "wheel":
        if not urllib.parse.urlsplit(rest).path.endswith(".whl"):
            raise SpecError(f"torch spec {text!r}: a wheel file name ends in .whl")
        return TorchSpec(text, "wheel", location=rest)
    return TorchSpec(text, "path", location=rest)


# ---------------------------------------------------------------------------- probing
def _probe(python: Path, pythonpath: tuple[Path, ...], what: str) -> dict[str, str]:
    """Import torch with ``python`` and return its version, git_version and file."""
    try:
        proc = subprocess.run(
            [str(python), "-c", _PROBE],
            # Autoloaded device backends are not what is being asked about, and one that is
            # broken against this torch must not hide the torch's own version.
            env=child_env({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, pythonpath_front=pythonpath),
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisionError(f"cannot run {python} to import torch for {what}: {exc}") from None
    for line in proc.stdout.splitlines():
        if line.startswith("OOTCI_TORCH="):
            return dict(json.loads(line.removeprefix("OOTCI_TORCH=")))
    tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
    raise ProvisionError(f"torch does not import for {what} ({python}):\n{tail}")


def _python_identity() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "machine": platform.machine(),
        "base_prefix": sys.base_prefix,
    }


def _key(**parts: str) -> str:
    blob = json.dumps({**parts, **_python_identity()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _env(
    spec: TorchSpec,
    python: Path,
    probe: dict[str, str],
    key: str,
    pythonpath: tuple[Path, ...] = (),
) -> TorchEnv:
    return TorchEnv(
        spec=spec.text,
        source_kind=spec.kind,
        python=python,
        version=probe["version"],
        git_version=probe["git_version"] or "",
        env_key=key,
        torch_dir=Path(probe["file"]).parent,
        pythonpath=tuple(pythonpath),
    )


# ---------------------------------------------------------------------------- resolution
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


def newest_on_index(index_url: str, project: str = "torch") -> Artifact:
    """The newest wheel of ``project`` on a PEP 503 index that installs on this Python
    (pre-releases included: nightlies are dev versions)."""
    page_url = f"{index_url.rstrip('/')}/{canonicalize_name(project)}/"
    parser = _Links()
    parser.feed(_fetch(page_url))
    supported = set(sys_tags())
    best: tuple[object, Artifact] | None = None
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
        candidate = Artifact(project, str(version), absolute, sha256)
        if best is None or version > best[0]:  # type: ignore[operator]
            best = (version, candidate)
    if best is None:
        raise ProvisionError(
            f"no {project} wheel for this Python ({platform.python_version()}, "
            f"{platform.machine()}) on {index_url}"
        )
    return best[1]


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


def _resolve_pip(spec: TorchSpec, log: LogSink) -> Artifact:
    """Ask pip which torch the requirement means, without installing anything."""
    if spec.index_url:
        _fetch(f"{spec.index_url}/torch/")  # pip ignores dead indexes silently: fail fast here
    with tempfile.TemporaryDirectory(prefix="ootci-resolve-") as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--no-deps",
            "--quiet",
            "--report",
            str(report),
            spec.requirement,
        ]
        env = child_env({})
        if spec.index_url:
            cmd += ["--index-url", spec.index_url]
            env = _pip_env_for_index(spec.index_url)
        first_line = log.lines_written
        result = run_streaming(cmd, cwd=Path(tmp), env=env, log=log, timeout_s=600)
        if result.returncode != 0 or not report.is_file():
            output = log.tail(log.lines_written - first_line)
            reasons = [line for line in output if "ERROR" in line or "error:" in line]
            text = "\n".join(output)
            if result.killed_reason or any(sig in text for sig in _INFRA_SIGNATURES):
                why = result.killed_reason or (reasons[-1] if reasons else f"see {log.path}")
                raise ProvisionError(
                    f"pip failed (network or disk) resolving {spec.requirement!r}: {why}"
                )
            reason = "; ".join(reasons[-3:]) or f"pip exited with {result.returncode}"
            raise SpecError(f"torch requirement {spec.requirement!r} does not resolve: {reason}")
        installs = json.loads(report.read_text())["install"]
    item = next(i for i in installs if canonicalize_name(i["metadata"]["name"]) == "torch")
    info = item["download_info"]
    return Artifact(
        "torch",
        item["metadata"]["version"],
        info["url"],
        info.get("archive_info", {}).get("hashes", {}).get("sha256", ""),
    )


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _resolve_wheel(spec: TorchSpec, cache_dir: Path, log: LogSink) -> Artifact:
    location = spec.location
    if _is_url(location) and not location.startswith("file:"):
        name = urllib.parse.unquote(urllib.parse.urlsplit(location).path.rsplit("/", 1)[-1])
        target = cache_dir / "wheels" / hashlib.sha256(location.encode()).hexdigest()[:16] / name
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
        path = Path(
            urllib.parse.urlsplit(location).path if location.startswith("file:") else location
        )
        path = path.expanduser().resolve()
        if not path.is_file():
            raise SpecError(f"torch spec {spec.text!r}: no wheel file at {path}")
    try:
        name, version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise SpecError(f"torch spec {spec.text!r}: {exc}") from None
    if name != "torch":
        raise SpecError(f"torch spec {spec.text!r}: {path.name} is not a torch wheel")
    return Artifact("torch", str(version), path.as_uri(), _sha256_file(path))


# ---------------------------------------------------------------------------- venvs
def _installer() -> str:
    return "uv" if shutil.which("uv") else "pip"


def _create_venv(
    venv: Path, artifact: Artifact, extra_index: str, cache_dir: Path, log: LogSink
) -> Path:
    python = venv / "bin" / "python"
    if _installer() == "uv":
        overrides = {"UV_CACHE_DIR": str(cache_dir / "uv")}
        # --seed: recipes run `{python} -m pip install ...`, so the venv needs pip.
        create = ["uv", "venv", "--seed", "--python", sys.executable, str(venv)]
        install = ["uv", "pip", "install", "--python", str(python)]
    else:
        overrides = {"PIP_CACHE_DIR": str(cache_dir / "pip")}
        create = [sys.executable, "-m", "venv", str(venv)]
        install = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    if extra_index:
        install += ["--extra-index-url", extra_index]
    install += [artifact.url, *TEST_TOOLS, *BUILD_TOOLS]
    environ = child_env(overrides)
    environ.pop("PYTHONPATH", None)  # the venv must see its own site-packages only
    for cmd, what in ((create, "create the venv"), (install, "install torch")):
        result = run_streaming(cmd, cwd=cache_dir, env=environ, log=log, timeout_s=PIP_TIMEOUT_S)
        if result.returncode != 0:
            raise ProvisionError(
                f"could not {what} for torch {artifact.version}: "
                f"{result.killed_reason or result.start_error or 'exit ' + str(result.returncode)}"
                f" (see {log.path})"
            )
    return python


def _provision_venv(spec: TorchSpec, artifact: Artifact, cache_dir: Path, log: LogSink) -> TorchEnv:
    key = _key(name=artifact.name, version=artifact.version, sha256=artifact.sha256 or artifact.url)
    envs = cache_dir / "envs"
    envs.mkdir(parents=True, exist_ok=True)
    venv = envs / key
    marker = venv / MARKER
    with (envs / f"{key}.lock").open("a") as lock:
        # Two workers provisioning the same torch: the second waits and then reuses.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file():
            recorded = json.loads(marker.read_text())
            log.write(f"ootci: reusing env {venv} (torch {recorded['version']})")
            stamp(venv)
            return _env(spec, venv / "bin" / "python", recorded, key)
        if venv.exists():
            log.write(f"ootci: removing incomplete env {venv}")
            shutil.rmtree(venv)
        started = time.monotonic()
        try:
            python = _create_venv(venv, artifact, spec.index_url, cache_dir, log)
            probe = _probe(python, (), spec.text)
        except BaseException:
            shutil.rmtree(venv, ignore_errors=True)
            raise
        # Written last: its presence is what makes the env reusable.
        marker.write_text(json.dumps({**probe, "artifact": asdict(artifact), "spec": spec.text}))
        stamp(venv)
        log.write(
            f"ootci: provisioned torch {probe['version']} in {time.monotonic() - started:.0f} s"
        )
        return _env(spec, python, probe, key)


def _tree_fingerprint(tree: Path) -> str:
    """Changes whenever a file under ``tree`` is added, removed or rewritten. An overlay
    patched in place keeps its version string, and must not reuse the env (and the build)
    of its previous contents. Stats, not contents: ~15k files of torch in well under 1 s."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        for name in sorted(filenames):
            st = os.stat(os.path.join(dirpath, name))
            rel = os.path.relpath(os.path.join(dirpath, name), tree)
            digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _overlay_venv(cache_dir: Path, key: str, log: LogSink) -> Path:
    """A thin venv for ``installed`` and ``path:`` specs that sees ootci's own packages
    (torch, pytest, numpy, pip, setuptools) behind its own site-packages.

    Backends are built with ``{python} -m pip install .``: in ootci's interpreter every
    overlay's build would overwrite the one before, and two workers testing two overlays
    would test each other's builds. Here each overlay gets its own site-packages.
    """
    envs = cache_dir / "envs"
    envs.mkdir(parents=True, exist_ok=True)
    venv = envs / key
    python = venv / "bin" / "python"
    with (envs / f"{key}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / MARKER).is_file():
            log.write(f"ootci: reusing overlay env {venv}")
            stamp(venv)
            return python
        shutil.rmtree(venv, ignore_errors=True)
        environ = child_env({})
        environ.pop("PYTHONPATH", None)
        cmd = [sys.executable, "-m", "venv", "--without-pip", str(venv)]
        result = run_streaming(cmd, cwd=cache_dir, env=environ, log=log, timeout_s=300)
        if result.returncode != 0:
            raise ProvisionError(f"could not create the overlay env {venv} (see {log.path})")
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            env=environ,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # addsitedir, not plain path lines: ootci's site dirs with their own .pth files, so
        # what is installed there in editable mode stays whole (metadata without code
        # would break torch's backend autoload). The venv's site-packages still come first.
        base = [p for p in site.getsitepackages() if Path(p).is_dir()]
        (Path(purelib) / "_ootci_base.pth").write_text(
            "".join(f"import site; site.addsitedir({p!r})\n" for p in base)
        )
        (venv / MARKER).write_text(json.dumps({"kind": "overlay", "base": base}))
        stamp(venv)
    return python


def provision(spec: TorchSpec, cache_dir: Path, log: LogSink) -> TorchEnv:
    cache_dir = Path(cache_dir).resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    log.write(f"ootci: provisioning torch for {spec.text!r}")
    if spec.kind == "installed":
        python = Path(sys.executable)
        try:
            probe = _probe(python, (), spec.text)
        except ProvisionError as exc:
            raise SpecError(
                f"'installed': the interpreter running ootci has no usable torch: {exc}"
            ) from None
        key = _key(
            kind="installed", prefix=sys.prefix, version=probe["version"], git=probe["git_version"]
        )
        # Building a backend must not install it into ootci's own environment.
        return _env(spec, _overlay_venv(cache_dir, key, log), probe, key)
    if spec.kind == "path":
        root = Path(spec.location).expanduser().resolve()
        if not (root / "torch" / "__init__.py").is_file():
            raise SpecError(
                f"torch spec {spec.text!r}: {root} is not a torch install (no torch/__init__.py)"
            )
        probe = _probe(Path(sys.executable), (root,), spec.text)
        if not Path(probe["file"]).resolve().is_relative_to(root):
            raise ProvisionError(f"{root}: PYTHONPATH did not win, torch came from {probe['file']}")
        key = _key(
            kind="path",
            root=str(root),
            version=probe["version"],
            git=probe["git_version"],
            tree=_tree_fingerprint(root / "torch"),
        )
        python = _overlay_venv(cache_dir, key, log)
        return _env(spec, python, probe, key, pythonpath=(root,))
    if spec.kind == "pip":
        artifact = _resolve_pip(spec, log)
    elif spec.kind == "nightly":
        artifact = newest_on_index(spec.index_url)
    elif spec.kind == "wheel":
        artifact = _resolve_wheel(spec, cache_dir, log)
    else:
        raise SpecError(f"unknown torch spec kind {spec.kind!r}")
    log.write(f"ootci: {spec.text!r} resolved to torch {artifact.version} ({artifact.url})")
    return _provision_venv(spec, artifact, cache_dir, log)
