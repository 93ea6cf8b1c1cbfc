"""The undone torch: an overlay of the red run's torch package in which a suspect's
installed files are put back to the range base, as a ``path:`` torch spec.

The overlay is all or nothing: it is made in a hidden sibling directory and renamed into
place only when every file was restored, so a failed restore leaves no half-made torch
that a later run could pick up. The red torch is hard-linked (symlinked across filesystems),
and a restored file is a new file: the red install is never written through a link.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import sysconfig
from collections.abc import Callable, Mapping
from pathlib import Path

from service.domain.verification import How, Restore, RestoreError, UndoPlan, reverse_apply

# A file from the contents API at the base ref; None: it did not exist there (404).
FileAt = Callable[[str, str], bytes | None]


def red_torch_dir(torch_spec: str, python: str | None) -> Path:
    """The ``torch`` package the red run built against: a ``path:`` spec's own, else the
    one its provisioned interpreter finds (the shared env, which the run only layered).

    Found by reading the env's site dirs, never by starting its interpreter: that would
    run every ``.pth`` of the red wheel outside the sandbox, as the worker."""
    if torch_spec.startswith("path:"):
        found = Path(torch_spec.removeprefix("path:")).expanduser().resolve() / "torch"
    elif python and Path(python).exists():
        found = _torch_in(_site_packages(Path(python).parent.parent)) or Path("/nonexistent")
    else:
        raise RestoreError(f"the red run's torch env ({python or 'none recorded'}) is gone")
    if not (found / "__init__.py").is_file():
        raise RestoreError(f"the red run's torch is not at {found} any more")
    return found


def _site_packages(prefix: Path) -> Path:
    return Path(sysconfig.get_paths(vars={"base": str(prefix), "platbase": str(prefix)})["purelib"])


# What ``layered_venv`` (workers/pipeline/env/layered.py) writes into a layered env's .pth, one line per parent site dir.
_ADDSITEDIR = re.compile(r"import site; site\.addsitedir\((?P<arg>'[^']*'|\"[^\"]*\")\)")


def _torch_in(site: Path, seen: frozenset[Path] = frozenset()) -> Path | None:
    """``site``'s torch package, else the first found behind it, in the order Python
    would: its own, then each parent a layering .pth adds (a cycle is not followed)."""
    if (site / "torch" / "__init__.py").is_file():
        return site / "torch"
    if site in seen or not site.is_dir():
        return None
    for pth in sorted(site.glob("*.pth")):
        for line in pth.read_text(errors="replace").splitlines():
            if (m := _ADDSITEDIR.fullmatch(line.strip())) is not None:
                parent = _torch_in(Path(ast.literal_eval(m["arg"])), seen | {site})
                if parent is not None:
                    return parent
    return None


def restored_contents(
    torch_dir: Path, plan: UndoPlan, base_sha: str, file_at: FileAt
) -> tuple[dict[str, bytes | None], tuple[str, ...]]:
    """Each installed file of ``plan`` (relative to site-packages) as the base had it
    (None: the base had no such file, remove it), and the upstream files skipped because
    this torch does not install them (a CUDA header in a CPU wheel). Raises
    ``RestoreError`` with which file and why, before anything is written."""
    site = torch_dir.parent
    out: dict[str, bytes | None] = {}
    skipped: list[str] = []
    for restore in plan.restores:
        present = (site / restore.installed).is_file()
        # A changed (not moved) file this wheel lacks was never part of what it built on.
        same_place = restore.base_source in (None, restore.source) and not restore.removed
        if not present and same_place and restore.how is not How.DELETE:
            skipped.append(restore.source)
            continue
        if not present and restore.how is How.DELETE:
            continue
        out[restore.installed] = _restored(site, restore, base_sha, file_at)
    if not out:
        raise RestoreError("none of its installed files is in this torch: "
                           + ", ".join(skipped or plan.files))
    return out, tuple(skipped)


def _restored(site: Path, restore: Restore, base_sha: str, file_at: FileAt) -> bytes | None:
    if restore.how is How.DELETE:
        return None
    if restore.how is How.CONTENTS:
        source = restore.base_source or restore.source
        content = file_at(source, base_sha)
        if content is None:
            raise RestoreError(f"{source} at {base_sha[:12]}: the contents API answered 404")
        return content
    red = site / restore.installed
    try:
        return reverse_apply(red.read_text(encoding="utf-8"), restore.patch or "").encode()
    except RestoreError as exc:
        raise RestoreError(f"{restore.source}: {exc}") from None


_GIT_VERSION = re.compile(r"^git_version\s*(?::\s*str\s*)?=\s*['\"]([^'\"]*)['\"]", re.M)


def undone_version(torch_dir: Path, sha: str) -> dict[str, bytes]:
    """``torch/version.py`` with a git_version of its own (``<red>-undo-<suspect>``): the
    overlay is not the red torch, and a run that passes on it must never be taken for a
    pass on the red torch by triage's history."""
    text = (torch_dir / "version.py").read_text(encoding="utf-8")
    found = _GIT_VERSION.search(text)
    red = found.group(1) if found else "unknown"
    mark = f"{red[:40]}-undo-{sha[:12]}"
    if found:
        text = text[:found.start(1)] + mark + text[found.end(1):]
    else:
        text += f"\ngit_version = {mark!r}\n"
    return {"torch/version.py": text.encode()}


def build_overlay(torch_dir: Path, dest: Path, contents: Mapping[str, bytes | None]) -> Path:
    """``dest/torch``: ``torch_dir`` with ``contents`` written over it (relative to
    site-packages; None removes). Returns ``dest`` for ``path:<dest>``. Atomic."""
    if dest.exists():
        raise FileExistsError(f"{dest} exists")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        shutil.copytree(torch_dir, partial / "torch", copy_function=_link_or_copy, symlinks=True)
        for rel, content in contents.items():
            target = partial / rel
            if not target.resolve().is_relative_to((partial / "torch").resolve()):
                raise RestoreError(f"{rel}: outside the torch package")
            if target.exists() or target.is_symlink():
                target.unlink()  # never write through the link to the red install
            if content is not None:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
        _drop_bytecode(partial / "torch", contents)
        os.rename(partial, dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return dest


def _link_or_copy(src: str, dst: str) -> None:
    # Across filesystems a symlink, not a copy: a torch is ~15k files and 750 MB.
    try:
        os.link(src, dst)
    except OSError:
        os.symlink(os.path.abspath(src), dst)


def _drop_bytecode(torch: Path, contents: Mapping[str, bytes | None]) -> None:
    # A linked __pycache__ entry of a restored .py would be checked by mtime and size only.
    for rel in contents:
        if rel.endswith(".py"):
            pycache = (torch.parent / rel).parent / "__pycache__"
            stem = Path(rel).stem + "."
            for cached in pycache.glob(f"{stem}*.pyc") if pycache.is_dir() else ():
                cached.unlink()


def remove_overlay(dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
