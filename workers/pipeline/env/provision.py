"""Torch environments: a virtualenv (or a thin overlay venv) that imports the torch a spec
means, keyed so that a second provision of the same torch is a lookup.

``pip:``, ``wheel:`` and ``nightly`` resolve first (``resolve.py``) to one artifact and get a
virtualenv keyed by that artifact and the Python it runs on, under ``<cache_dir>/envs/<key>``:
two specs that resolve to the same wheel share it. The env's torch is installed from the
resolved URL itself, so what was resolved is what gets installed. ``installed`` and
``path:<dir>`` get a thin venv over ootci's own packages (``path:`` keyed by the tree's file
stats).

Every env here is a shared base: installed by ``installer.py`` (uv, hard links from the
package cache; pip when uv is missing), then read-only with a manifest that is verified
before each reuse (``envcache.py``: a tampered env is rebuilt, never used). Runs build and
test in a private venv over it (``run_env.py``). A torch that does not import in its fresh
env is ``TorchUnusable`` (upstream's break, never retried), its innermost error in the log.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import platform
import site
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, replace
from pathlib import Path

from service.domain.torch_spec import SourceKind, TorchSpec
from workers.pipeline.cache.layout import (
    bytecode_store,
    default_package_cache,
    env_dir,
    env_lock,
    stamp,
)
from workers.pipeline.env import envcache, installed_probe
from workers.pipeline.env.digest import sha256_file
from workers.pipeline.env.import_probe import decisive_text, probe_import, without_autoload
from workers.pipeline.env.installer import Installer
from workers.pipeline.env.layered import layered_venv
from workers.pipeline.env.resolve import Artifact, resolve
from workers.pipeline.env.torch_env import TorchEnv
from workers.pipeline.errors import ProvisionError, SpecError, TorchUnusable
from workers.pipeline.isolation.procs import child_env, run_streaming
from workers.pipeline.isolation.sandbox import StepSandbox, hand_over, run_captured
from workers.pipeline.logs.sink import LogSink

# What every backend suite can count on besides torch.
TEST_TOOLS = ("numpy", "expecttest", "pytest", "pytest-timeout")
# Backends build with `pip install --no-build-isolation` against the env's torch, so the
# build backend itself must already be there.
BUILD_TOOLS = ("setuptools", "wheel", "pyyaml")  # pyyaml: torchgen, which torch_openreg's build runs
MARKER = "ootci-env.json"
PIP_TIMEOUT_S = 3600
_PROBE = (
    "import json, torch; print('OOTCI_TORCH=' + json.dumps({'version': torch.__version__, "
    "'git_version': getattr(torch.version, 'git_version', ''), 'file': torch.__file__}))"
)


# The sandbox an import probe runs in (the run's: ``probe_sandbox.py``), given what it
# reads and what it may write: the env being made, so the bytecode the import compiles is
# kept for every later run (envcache.share_bytecode).
ProbeSandbox = Callable[[Sequence[Path], Sequence[Path]], StepSandbox]


# ---------------------------------------------------------------------------- probing
def _probe(
    python: Path, pythonpath: tuple[Path, ...], what: str, log: LogSink | None = None,
    sandbox_for: ProbeSandbox | None = None, writes: Sequence[Path] = (),
) -> dict[str, str]:
    """Import torch with ``python`` and return its version, git_version and file, in the
    sandbox ``sandbox_for`` makes (the import runs the wheel's or the tree's code). A torch
    that does not import is ``TorchUnusable``, with the innermost error of the import (asked
    again through ``import_probe``, from a neutral dir) written to ``log``."""
    sandbox = sandbox_for([python.parent.parent, *pythonpath], writes) if sandbox_for else None
    if sandbox is not None:
        sandbox.prepare(log.write if log is not None else None)
    try:
        return _probe_in(python, pythonpath, what, log, sandbox)
    finally:
        if sandbox is not None and os.geteuid() == 0:
            for path in writes:  # a shared env is root's again before anyone uses it
                hand_over(path, 0)


def _probe_in(
    python: Path, pythonpath: tuple[Path, ...], what: str, log: LogSink | None,
    sandbox: StepSandbox | None,
) -> dict[str, str]:
    # Autoloaded device backends are not what is being asked about, and one that is broken
    # against this torch must not hide the torch's own version.
    environ = child_env({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, pythonpath_front=pythonpath)
    # In the sandbox the worker's /tmp is the run's TMPDIR: the neutral dir is made there.
    scratch = str(sandbox.tmp) if sandbox is not None and sandbox.tmp is not None else None
    with tempfile.TemporaryDirectory(prefix="ootci-probe-", dir=scratch) as tmp:
        neutral = Path(tmp)
        if sandbox is not None:
            sandbox.own_dir(neutral)
        try:
            # bwrap failing to start it (SandboxUnusable, infra) is never "torch does not
            # import" (TorchUnusable, upstream's).
            proc = run_captured(sandbox, [str(python), "-c", _PROBE], cwd=neutral,
                                env=environ, timeout_s=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ProvisionError(f"cannot run {python} to import torch for {what}: {exc}") from None
        for line in proc.stdout.splitlines():
            if line.startswith("OOTCI_TORCH="):
                return dict(json.loads(line.removeprefix("OOTCI_TORCH=")))
        try:
            result = probe_import(python, "torch", without_autoload(environ), neutral,
                                  sandbox=sandbox)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ProvisionError(f"cannot run {python} to import torch for {what}: {exc}") from None
    text = decisive_text(result, torch_itself=True)
    if log is not None:
        log.write(text)
    innermost = result.innermost or f"the interpreter exited with {result.returncode}"
    raise TorchUnusable(f"torch does not import for {what} ({python}): {innermost}", innermost)


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
    artifact: Artifact | None = None,
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
        artifact_url=artifact.url if artifact else "",
        artifact_sha256=artifact.sha256 if artifact else "",
    )


# ---------------------------------------------------------------------------- venvs
def _pinned(artifact: Artifact, installer: Installer) -> str:
    """The requirement that installs exactly the resolved bytes. The hash rides on the URL,
    so the installer refuses other bytes; uv takes no fragment on a file URL, so a local
    wheel is hashed again here, just before uv reads it."""
    if not artifact.sha256:
        return artifact.url
    if installer.uv is not None and artifact.url.startswith("file:"):
        path = Path(urllib.request.url2pathname(urllib.parse.urlparse(artifact.url).path))
        if sha256_file(path) != artifact.sha256:
            raise ProvisionError(f"{path} changed since it was resolved (sha256 differs)")
        return str(path)
    return f"{artifact.url}#sha256={artifact.sha256}"


def _create_venv(
    venv: Path, artifact: Artifact, extra_index: str, installer: Installer, log: LogSink,
    *, fresh: bool = False,
) -> Path:
    python = venv / "bin" / "python"
    create = installer.create_venv(venv)
    install = installer.install(
        python, [_pinned(artifact, installer), *TEST_TOOLS, *BUILD_TOOLS], extra_index, fresh=fresh
    )
    environ = child_env(installer.environ())
    environ.pop("PYTHONPATH", None)  # the venv must see its own site-packages only
    log.write(f"ootci: installing with {installer.name} (package cache {installer.cache_dir})")

    def run(cmd: list[str], what: str) -> None:
        result = run_streaming(cmd, cwd=venv.parent, env=environ, log=log, timeout_s=PIP_TIMEOUT_S)
        if result.returncode != 0:
            raise ProvisionError(
                f"could not {what} for torch {artifact.version}: "
                f"{result.killed_reason or result.start_error or 'exit ' + str(result.returncode)}"
                f" (see {log.path})"
            )

    run(create, "create the venv")
    # A fresh install bypasses the package cache: nothing to share, no turn to take.
    with nullcontext() if fresh else installer.taking_turns(log.write):
        run(install, "install torch")
    return python


def _reusable(venv: Path, log: LogSink) -> bool | None:
    """Whether the finished env at ``venv`` is what it was made as (``envcache.verify``):
    True, False when there is none, None when it was tampered with (logged and removed, to
    be rebuilt past the package cache its files were linked from)."""
    if not (venv / MARKER).is_file():
        return False
    verdict = envcache.verify(venv)
    if verdict.intact:
        if verdict.removed_bytecode:
            log.write(f"ootci: removed {verdict.removed_bytecode} stray bytecode files from {venv}")
        return True
    log.write(
        f"ootci: env {venv} changed since it was made, rebuilding it: {'; '.join(verdict.changes)}"
    )
    logging.getLogger(__name__).warning("tampered torch env %s: %s", venv, verdict.changes)
    envcache.remove(venv)
    return None


def _seal(venv: Path) -> None:
    """Finish an env: stamped, read-only, its manifest recorded (envcache.py)."""
    stamp(venv)
    envcache.make_read_only(venv)
    envcache.record(venv)


def _provision_venv(
    spec: TorchSpec, artifact: Artifact, cache_dir: Path, installer: Installer, log: LogSink,
    probe_sandbox: ProbeSandbox | None = None,
) -> TorchEnv:
    key = _key(name=artifact.name, version=artifact.version, sha256=artifact.sha256 or artifact.url)
    venv = env_dir(cache_dir, key)
    venv.parent.mkdir(parents=True, exist_ok=True)
    marker = venv / MARKER
    with env_lock(venv).open("a") as lock:
        # Two workers provisioning the same torch: the second waits and then reuses.
        fcntl.flock(lock, fcntl.LOCK_EX)
        reusable = _reusable(venv, log)
        if reusable:
            recorded = json.loads(marker.read_text())
            log.write(f"ootci: reusing env {venv} (torch {recorded['version']})")
            stamp(venv)
            return _env(spec, venv / "bin" / "python", recorded, key, artifact=artifact)
        if venv.exists():
            log.write(f"ootci: removing incomplete env {venv}")
            envcache.remove(venv)
        started = time.monotonic()
        # Bytecode compiled by the first env of this key, shared through the package cache.
        bytecode = bytecode_store(installer.package_cache, key)
        try:
            python = _create_venv(
                venv, artifact, spec.index_url, installer, log, fresh=reusable is None
            )
            if reusable is not None:  # a tampered env's bytecode store is not trusted
                linked = envcache.adopt_bytecode(venv, bytecode)
                if linked:
                    log.write(f"ootci: linked {linked} compiled modules from {bytecode}")
            probe = _probe(python, (), spec.text, log, probe_sandbox, writes=(venv,))
        except BaseException:
            envcache.remove(venv)
            raise
        # Written last: its presence is what makes the env reusable.
        marker.write_text(json.dumps({**probe, "artifact": asdict(artifact), "spec": spec.text}))
        _seal(venv)
        if reusable is None:
            envcache.remove(bytecode)
        envcache.share_bytecode(venv, bytecode)
        log.write(
            f"ootci: provisioned torch {probe['version']} in {time.monotonic() - started:.0f} s"
        )
        return _env(spec, python, probe, key, artifact=artifact)


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
    venv = env_dir(cache_dir, key)
    venv.parent.mkdir(parents=True, exist_ok=True)
    python = venv / "bin" / "python"
    with env_lock(venv).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _reusable(venv, log):
            log.write(f"ootci: reusing overlay env {venv}")
            stamp(venv)
            return python
        envcache.remove(venv)
        base = [p for p in site.getsitepackages() if Path(p).is_dir()]
        log.write(f"ootci: creating the overlay env {venv} over {', '.join(base)}")
        try:
            layered_venv(venv, base, pth="_ootci_base.pth")
        except OSError as exc:
            raise ProvisionError(f"could not create the overlay env {venv}: {exc}") from None
        (venv / MARKER).write_text(json.dumps({"kind": "overlay", "base": base}))
        _seal(venv)
    return python


def _installed_probe(
    cache_dir: Path, log: LogSink, probe_sandbox: ProbeSandbox | None
) -> dict[str, str]:
    """The ``installed`` torch's probe, run again only when the install changed
    (``installed_probe.py``)."""
    package = installed_probe.torch_dir()
    print_ = installed_probe.fingerprint(package) if package is not None else None
    if print_ is not None and (probe := installed_probe.recalled(cache_dir, print_)) is not None:
        log.write(f"ootci: torch unchanged at {package} since its import was probed")
        return probe
    try:
        probe = _probe(Path(sys.executable), (), "installed", None, probe_sandbox)
    except ProvisionError as exc:
        raise SpecError(
            f"'installed': the interpreter running ootci has no usable torch: {exc}"
        ) from None
    if print_ is not None:
        installed_probe.remember(cache_dir, print_, probe)
    return probe


def provision(
    spec: TorchSpec,
    cache_dir: Path,
    log: LogSink,
    *,
    commit_date: dt.date | None = None,
    package_cache: Path | None = None,
    installer: Installer | None = None,
    probe_sandbox: ProbeSandbox | None = None,
) -> TorchEnv:
    """The base env of ``spec``: shared, read-only, verified on reuse. A run builds and
    tests in a private overlay of it (``run_env.private_env``). ``package_cache`` is the
    installer's (``Settings.package_cache_dir``), default ``<cache_dir>/packages``;
    ``installer`` defaults to uv when there is one, else pip. Each ``import torch`` probe
    runs in the sandbox ``probe_sandbox`` makes (none: unsandboxed, for callers outside a
    run)."""
    cache_dir = Path(cache_dir).resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    log.write(f"ootci: provisioning torch for {spec.text!r}")
    if spec.kind == SourceKind.INSTALLED:
        probe = _installed_probe(cache_dir, log, probe_sandbox)
        key = _key(
            kind="installed", prefix=sys.prefix, version=probe["version"], git=probe["git_version"]
        )
        # Building a backend must not install it into ootci's own environment.
        own = tuple(Path(p) for p in site.getsitepackages() if Path(p).is_dir())
        return replace(_env(spec, _overlay_venv(cache_dir, key, log), probe, key), base_dirs=own)
    if spec.kind == SourceKind.PATH:
        root = Path(spec.location).expanduser().resolve()
        if not (root / "torch" / "__init__.py").is_file():
            raise SpecError(
                f"torch spec {spec.text!r}: {root} is not a torch install (no torch/__init__.py)"
            )
        probe = _probe(Path(sys.executable), (root,), spec.text, log, probe_sandbox)
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
    if spec.kind == SourceKind.RUN:
        raise SpecError(
            f"torch spec {spec.text!r}: a run: spec is provisioned as the wheel the run "
            "recorded (pinned_to_artifact)"
        )
    artifact = resolve(spec, cache_dir, log, commit_date=commit_date)
    installer = installer or Installer.detect(Path(package_cache or default_package_cache(cache_dir)).resolve())
    return _provision_venv(spec, artifact, cache_dir, installer, log, probe_sandbox)
