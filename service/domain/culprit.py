"""Culprit ranking: which upstream commit of a regression range broke the backend.

A heuristic in the spirit of LUCI Bisection's heuristic analysis: every commit of the range
is scored by how well what it changed (files, added and removed patch lines) matches what
the failure names (the header the compiler could not find, the symbol, class or hook it
names, the Python module and attribute, the message a new check raised, the torch files on
a crashing stack), with path priors (``c10/core`` weighs more than ``docs/``), and reverts
and relands taken into account.

``rank_culprits(failures, commits) -> CulpritRanking``

- ``failures``: the evidence of each failure of the breakage (``FailureEvidence``, built
  from a classifier ``Finding`` by ``evidence_from_finding``).
- ``commits``: the range, oldest first, as the compare API lists it.
- Only commits with positive evidence become suspects; an empty list is an explicit
  ``Confidence.NO_SUSPECT`` (never the newest commit as a fallback).

Each clue contributes at most once per commit (its best match over the commit's files), and
clues combine by noisy-OR, so a score stays in [0, 1] and a commit touching a hundred files
does not outscore one that deletes the named header. Pure: no I/O.

Cost: each commit is indexed once (per file: its added, removed and hunk-header lines and
the identifiers in them, a few C-speed regex passes); a clue then costs a set lookup per
file and only the files that contain its identifier are looked at line by line.
"""

from __future__ import annotations

import enum
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from service.domain.upstream import FileChange, UpstreamCommit
from service.domain.verdict import Category, Finding, Stage, Subtype

# ---------------------------------------------------------------------------- evidence


@dataclass(frozen=True)
class StackFrame:
    """A frame of a Python traceback inside torch: source path and function."""

    path: str  # source-relative, e.g. "torch/utils/backend_registration.py"
    function: str


@dataclass(frozen=True)
class FailureEvidence:
    """What one failure names, as the classifier captured it."""

    category: Category
    subtype: Subtype
    captures: Mapping[str, str] = field(default_factory=dict)
    line: str = ""  # the decisive log line
    stage: Stage | None = None
    context: tuple[str, ...] = ()  # log lines around the decisive one
    frames: tuple[StackFrame, ...] = ()  # torch frames of the failing stack, outermost first


_TORCH_INCLUDE = re.compile(r"/torch/include/([\w./+-]+\.(?:h|hpp|cuh|inc|hh))")
_FAULTHANDLER_FRAME = re.compile(r'File "([^"]+)", line \d+,? in (\w+)')
_PYTEST_FRAME = re.compile(r"^(\S+\.py):\d+: in (\w+)")
_TORCH_PY = re.compile(r"(?:^|/)(torch/[\w./-]+\.py)$")


def stack_frames(lines: Iterable[str]) -> tuple[StackFrame, ...]:
    """The torch frames of the Python tracebacks in ``lines`` (faulthandler's
    ``File "...", line N in f`` and pytest's ``path.py:N: in f``), outermost first."""
    frames: list[StackFrame] = []
    innermost_first: list[StackFrame] = []  # faulthandler prints the most recent call first
    seen: set[StackFrame] = set()
    for line in lines:
        text = line.strip()
        fault = _FAULTHANDLER_FRAME.search(text)
        m = fault or _PYTEST_FRAME.search(text)
        if m is None:
            continue
        path = _TORCH_PY.search(m.group(1))
        if path is None:
            continue
        frame = StackFrame(path.group(1), m.group(2))
        if frame not in seen:
            seen.add(frame)
            (innermost_first if fault else frames).append(frame)
    return tuple(frames) + tuple(reversed(innermost_first))


def evidence_from_finding(finding: Finding, log_lines: Sequence[str] = ()) -> FailureEvidence:
    """Evidence from a classifier finding; ``log_lines``, when given, are searched for the
    torch frames of a traceback that lies beyond the finding's short context (a
    faulthandler dump is longer than the context the finding keeps)."""
    context = tuple(finding.context_before) + tuple(finding.context_after)
    return FailureEvidence(
        category=finding.category,
        subtype=finding.subtype,
        captures=dict(finding.captures),
        line=finding.line,
        stage=finding.stage,
        context=context,
        frames=stack_frames(log_lines or context),
    )


# ---------------------------------------------------------------------------- results


class Confidence(enum.StrEnum):
    HIGH = "high"  # one commit explains the failure far better than the rest
    MEDIUM = "medium"
    LOW = "low"  # something matches, weakly: read the reasons
    NO_SUSPECT = "no-suspect"  # nothing in the range matches what the failure names


@dataclass(frozen=True)
class Suspect:
    sha: str
    pr: int | None
    title: str
    score: float
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"sha": self.sha, "pr": self.pr, "title": self.title, "score": self.score,
                "reasons": list(self.reasons)}


@dataclass(frozen=True)
class CulpritRanking:
    suspects: tuple[Suspect, ...]
    confidence: Confidence
    commits_considered: int
    # Commits ruled out whatever they touch (reverted later in the range), with why.
    cleared: tuple[tuple[str, str], ...] = ()

    @property
    def top(self) -> Suspect | None:
        return self.suspects[0] if self.suspects else None

    def to_dict(self) -> dict[str, object]:
        """The ``suspects`` / ``confidence`` part of ``ootci culprit --json`` (the caller
        adds the range)."""
        return {
            "confidence": self.confidence.value,
            "commits_considered": self.commits_considered,
            "suspects": [s.to_dict() for s in self.suspects],
            "cleared": [{"sha": sha, "why": why} for sha, why in self.cleared],
        }


# ---------------------------------------------------------------------------- paths

# Where PrivateUse1 backends are broken from, and where they are not.
_PRIORS: tuple[tuple[str, float], ...] = (
    ("torch/utils/backend_registration.py", 1.0),
    ("c10/core/", 1.0),
    ("aten/src/ATen/detail/", 1.0),
    ("torch/csrc/", 1.0),
    ("c10/", 0.9),
    ("aten/src/ATen/core/", 0.95),
    ("aten/src/ATen/", 0.85),
    ("torch/headeronly/", 0.9),
    ("torch/testing/", 0.4),
    ("torch/", 0.85),
    ("CMakeLists.txt", 0.8),
    ("cmake/", 0.7),
    ("test/", 0.35),
    ("benchmarks/", 0.3),
    ("third_party/", 0.3),
    ("docs/", 0.2),
    (".ci/", 0.15),
    (".github/", 0.1),
)
_DEFAULT_PRIOR = 0.6


def path_prior(path: str) -> float:
    for prefix, weight in _PRIORS:
        if path.startswith(prefix) or path == prefix:
            return weight
    return _DEFAULT_PRIOR


def source_paths_for_include(header: str) -> tuple[str, ...]:
    """Where an installed header (as included: ``ATen/core/X.h``, or as installed under
    ``torch/include``) lives in the source tree."""
    header = header.lstrip("/")
    if header.startswith("include/"):
        header = header[len("include/"):]
    if header.startswith("ATen/"):
        return ("aten/src/" + header,)
    if header.startswith("aten/src/"):
        return (header,)
    return (header,)


def _path_matches(candidate: str, wanted: str) -> bool:
    return candidate == wanted or candidate.endswith("/" + wanted)


# ---------------------------------------------------------------------------- commit index

_IDENT = re.compile(r"[A-Za-z_]\w*")
_STRING_LITERAL = re.compile(r'"((?:[^"\\]|\\.){12,})"')
_HUNK = re.compile(r"^@@ [^@]* @@ ?(.*)$")
_COMMENT = re.compile(r"^\s*(?://|#(?!\s*(?:define|include|if|error|undef))|\*|/\*|\"\"\"|>>>)")
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
_DECL_START = re.compile(
    r"^\s*(?:template\s*<[^>]*>\s*)?(?:virtual|inline|static|explicit|constexpr|extern|"
    r"TORCH_API|C10_API|TORCH_CUDA_CPP_API|C10_EXPORT|TORCH_PYTHON_API|def|async def|class|"
    r"struct|enum|union|using|typedef|namespace|#\s*define)\b"
)
_PURE_VIRTUAL = re.compile(r"\)\s*(?:const\s*)?(?:noexcept\s*)?=\s*0\s*;")
_PR_SUFFIX = re.compile(r"\s*\(#\d+\)\s*$")
_REVERT_OF = re.compile(r"This reverts commit ([0-9a-f]{7,40})")
_REVERTED_PR = re.compile(r"Reverted \S*/pull/(\d+)")
_RELAND_TITLE = re.compile(r"^\s*(?:\[?re-?land(?:ed|ing)?\]?:?\s*)+", re.IGNORECASE)


@dataclass(frozen=True)
class _Line:
    text: str
    removed: bool  # else added


@dataclass(frozen=True)
class _FileIndex:
    change: FileChange
    lines: tuple[_Line, ...]
    hunk_headers: tuple[str, ...]
    added_ids: frozenset[str]
    removed_ids: frozenset[str]
    hunk_ids: frozenset[str]
    added_literals: tuple[str, ...]
    includes_removed: frozenset[str]
    prior: float

    @property
    def path(self) -> str:
        return self.change.filename


def _index_file(change: FileChange) -> _FileIndex:
    added: list[str] = []
    removed: list[str] = []
    lines: list[_Line] = []
    hunks: list[str] = []
    for raw in (change.patch or "").split("\n"):
        if raw.startswith("+"):
            added.append(raw[1:])
            lines.append(_Line(raw[1:], False))
        elif raw.startswith("-"):
            removed.append(raw[1:])
            lines.append(_Line(raw[1:], True))
        elif raw.startswith("@@"):
            m = _HUNK.match(raw)
            if m and m.group(1):
                hunks.append(m.group(1))
    added_text = "\n".join(added)
    removed_text = "\n".join(removed)
    hunk_text = "\n".join(hunks)
    return _FileIndex(
        change=change,
        lines=tuple(lines),
        hunk_headers=tuple(hunks),
        added_ids=frozenset(_IDENT.findall(added_text)),
        removed_ids=frozenset(_IDENT.findall(removed_text)),
        hunk_ids=frozenset(_IDENT.findall(hunk_text)),
        added_literals=tuple(_STRING_LITERAL.findall(added_text)) if '"' in added_text else (),
        includes_removed=frozenset(
            m.group(1) for line in removed if (m := _INCLUDE.match(line))),
        prior=path_prior(change.filename),
    )


@dataclass(frozen=True)
class _CommitIndex:
    commit: UpstreamCommit

    @cached_property
    def files(self) -> tuple[_FileIndex, ...]:
        return tuple(_index_file(f) for f in self.commit.files)


# ---------------------------------------------------------------------------- clues


@dataclass(frozen=True)
class _Hit:
    weight: float
    reason: str


class _Clue(ABC):
    """One thing a failure names; ``match`` returns its best hit in a commit, or None."""

    def match(self, commit: _CommitIndex) -> _Hit | None:
        best: _Hit | None = None
        for f in commit.files:
            hit = self.match_file(f)
            if hit is not None and (best is None or hit.weight > best.weight):
                best = hit
        return best

    @abstractmethod
    def match_file(self, f: _FileIndex) -> _Hit | None:
        """The hit of this clue in one changed file, or None."""


@lru_cache(maxsize=4096)
def _word(name: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w])" + re.escape(name) + r"(?![\w])")


@lru_cache(maxsize=4096)
def _declaration_shapes(name: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    escaped = re.escape(name)
    return (
        # A return type then the name: `DataPtr allocate(size_t n) const override {`.
        re.compile(r"^[\w:<>,\s*&]+?[\s*&]" + escaped + r"\s*\("),
        # A Python export list entry or a module-level assignment; an enum/X-macro entry.
        re.compile(r"^(?:_\([^)]*,\s*)?" + escaped + r"\s*(?:,|\)|\bas\b|=[^=]|:)"),
    )


def _is_declaration(text: str, name: str) -> bool:
    if _DECL_START.match(text):
        return True
    stripped = text.strip()
    returns_name, listed = _declaration_shapes(name)
    m = returns_name.match(stripped)
    if m and not stripped.startswith(("return ", "return(")) and "=" not in stripped[: m.end()]:
        return True
    return bool(listed.match(stripped))


@dataclass(frozen=True)
class _HeaderClue(_Clue):
    """A header the compiler could not find (or found wanting): the commit that moved,
    deleted or edited it."""

    wanted: tuple[str, ...]  # source paths
    shown: str  # as the compiler named it
    missing: bool  # the compiler could not find it (else: the error is inside it)

    def match_file(self, f: _FileIndex) -> _Hit | None:
        change = f.change
        path = change.filename
        previous = change.previous_filename
        for wanted in self.wanted:
            if previous and _path_matches(previous, wanted) and change.status == "renamed":
                return _Hit(0.95 * max(f.prior, 0.5),
                            f"moves {previous} to {path}, "
                            f"{self._role()}")
            if _path_matches(path, wanted):
                if change.status == "removed":
                    return _Hit(0.95 * max(f.prior, 0.5), f"deletes {path}, {self._role()}")
                if change.status in ("modified", "changed"):
                    w = 0.35 if self.missing else 0.5
                    return _Hit(w * f.prior, f"edits {path}, {self._role()}")
            if self.missing and self.shown in f.includes_removed:
                return _Hit(0.3 * f.prior,
                            f"rewrites the #include of {self.shown} in {path}")
        return None

    def _role(self) -> str:
        return ("the header the compiler could not find" if self.missing
                else "the torch header the compiler error is in")


@dataclass(frozen=True)
class _SymbolClue(_Clue):
    """An identifier the failure names, matched on identifier boundaries in the commit's
    added and removed lines; declarations and removed lines weigh more."""

    name: str
    role: str  # how to call it in a reason: "symbol", "class", "hook", ...
    strength: float  # 1.0 for the failing symbol itself, less for qualifiers
    renamed_to: str | None = None  # the compiler's "did you mean" suggestion
    # An added declaration: a new overload or member is a weak hint, but a dtype added to
    # the ScalarType list is what a new-dtype failure is about.
    added_declaration: float = 0.6

    def match_file(self, f: _FileIndex) -> _Hit | None:
        name = self.name
        in_removed = name in f.removed_ids
        in_added = name in f.added_ids
        if not (in_removed or in_added):
            if name in f.hunk_ids:
                return _Hit(0.2 * self.strength * f.prior,
                            f"edits inside `{name}` ({f.path})")
            return None
        pattern = _word(name)
        mentions = [
            (line, " ".join(line.text.split())) for line in f.lines
            if (in_removed if line.removed else in_added) and pattern.search(line.text)
        ]
        # A line removed and added again unchanged but for whitespace was moved or
        # reformatted (a clang-format sweep): it changes nothing about the name.
        unchanged = ({text for line, text in mentions if line.removed}
                     & {text for line, text in mentions if not line.removed})
        best = 0.0
        why = ""
        removed_decl = added_decl = False
        for line, normalized in mentions:
            if normalized in unchanged:
                continue
            comment = bool(_COMMENT.match(line.text))
            decl = not comment and _is_declaration(line.text, name)
            if line.removed:
                removed_decl |= decl
                w = 0.3 if comment else (0.9 if decl else 0.65)
                verb = "a comment" if comment else ("a line declaring" if decl else "a line using")
                text = f"removes {verb} `{name}`"
            elif decl and _PURE_VIRTUAL.search(line.text):
                added_decl = True
                w, text = 0.9, f"adds the pure virtual `{name}`"
            else:
                added_decl |= decl
                w = 0.2 if comment else (self.added_declaration if decl else 0.45)
                verb = "a comment on" if comment else ("a declaration of" if decl else "a use of")
                text = f"adds {verb} `{name}`"
            if w > best:
                best, why = w, text
        if best == 0.0 and unchanged:
            best, why = 0.1, f"moves or reformats a line with `{name}`"
        if removed_decl and added_decl:
            best, why = 0.95, f"changes the declaration of `{name}`"
        if self.renamed_to and in_removed and self.renamed_to in f.added_ids:
            best, why = 0.97, f"renames `{name}` to `{self.renamed_to}`"
        if best == 0.0:
            return None
        return _Hit(best * self.strength * f.prior, f"{why} ({self.role}) in {f.path}")


@dataclass(frozen=True)
class _MessageClue(_Clue):
    """The error message a failing check raised: the commit that added its text."""

    message: str

    def match_file(self, f: _FileIndex) -> _Hit | None:
        for literal in f.added_literals:
            core = literal.strip().rstrip(".:").strip()
            if len(core) >= 12 and "{" not in core and "%" not in core and core in self.message:
                return _Hit(0.85 * f.prior, f'adds the message the failure shows, "{core}", '
                                            f"in {f.path}")
        return None


@dataclass(frozen=True)
class _TokenClue(_Clue):
    """Literal tokens a kind of failure is made of (a C++ standard's spellings)."""

    tokens: tuple[str, ...]
    what: str
    weight: float

    def match_file(self, f: _FileIndex) -> _Hit | None:
        for line in f.lines:
            if line.removed:
                continue
            for token in self.tokens:
                if token in line.text:
                    return _Hit(self.weight * f.prior,
                                f"adds `{line.text.strip()[:80]}` in {f.path} ({self.what})")
        return None


@dataclass(frozen=True)
class _FileClue(_Clue):
    """A file the failure implicates as a whole (a module, a stack frame, the
    registration API)."""

    wanted: tuple[str, ...]
    weight: float
    why: str
    function: str | None = None  # a stack frame's function: edits inside it weigh more

    def match_file(self, f: _FileIndex) -> _Hit | None:
        for wanted in self.wanted:
            if not (_path_matches(f.path, wanted) or (
                    f.change.previous_filename
                    and _path_matches(f.change.previous_filename, wanted))):
                continue
            fn = self.function
            if fn and (fn in f.hunk_ids or fn in f.added_ids or fn in f.removed_ids):
                return _Hit(min(1.0, self.weight * 1.6) * f.prior,
                            f"edits `{fn}` in {f.path}, {self.why}")
            return _Hit(self.weight * f.prior, f"edits {f.path}, {self.why}")
        return None


# ---------------------------------------------------------------------------- evidence -> clues

_QUALIFIED = re.compile(r"[\w:~]+")
_MANGLED_NAME = re.compile(r"(\d+)")
_DTYPE_ALIASES = {
    "float64": "Double", "double": "Double", "float32": "Float", "float": "Float",
    "float16": "Half", "half": "Half", "bfloat16": "BFloat16", "int64": "Long",
    "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
    "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64",
    "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}
# Names too common to point at anything on their own.
_GENERIC = frozenset({
    "at", "c10", "torch", "std", "detail", "impl", "int", "size_t", "void", "const", "openreg",
    "Tensor", "self", "device", "Device", "test", "tests", "ops", "native", "cuda",
})
_REGISTRATION_FILES = (
    "torch/utils/backend_registration.py",
    "aten/src/ATen/detail/PrivateUse1HooksInterface.h",
    "aten/src/ATen/detail/PrivateUse1HooksInterface.cpp",
    "torch/_utils.py",
)
_REGISTRATION_CALLS = ("_get_custom_mod_func", "getPrivateUse1Hooks",
                       "RegisterPrivateUse1HooksInterface", "_get_device_module")
_STANDARD_YEARS = {"11": "201103L", "14": "201402L", "17": "201703L", "20": "202002L",
                   "23": "202302L", "26": "202400L"}


def demangle_names(symbol: str) -> tuple[str, ...]:
    """The identifiers of an Itanium-mangled name, outermost first (``_ZN2at3fooEv`` ->
    ``("at", "foo")``); the qualified name split on ``::`` for a demangled one."""
    if symbol.startswith("_Z"):
        body = symbol[3:] if symbol.startswith("_ZN") else symbol[2:]
        names: list[str] = []
        i = 0
        while i < len(body) and body[i].isdigit():
            m = _MANGLED_NAME.match(body, i)
            if m is None:
                break
            n = int(m.group(1))
            start = m.end()
            names.append(body[start:start + n])
            i = start + n
            if not symbol.startswith("_ZN"):
                break
        return tuple(names)
    head = symbol.split("(", 1)[0].strip()
    words = _QUALIFIED.findall(head)
    qualified = words[-1] if words else head
    return tuple(p for p in qualified.split("::") if p)


def _symbol_clues(captures: Mapping[str, str]) -> list[_Clue]:
    clues: list[_Clue] = []
    seen: set[str] = set()

    def add(name: str, role: str, strength: float, renamed_to: str | None = None) -> None:
        name = name.lstrip("~")
        if not name or name in seen or name in _GENERIC or len(name) < 3:
            return
        seen.add(name)
        clues.append(_SymbolClue(name, role, strength, renamed_to))

    suggestion = captures.get("suggestion")
    suggested = demangle_names(suggestion)[-1] if suggestion else None
    for key in ("symbol", "hook", "method", "attribute"):
        value = captures.get(key)
        if not value:
            continue
        parts = demangle_names(value)
        if parts:
            add(parts[-1], key, 1.0, suggested if key == "symbol" else None)
            for qualifier in parts[:-1]:
                add(qualifier, "its class or namespace", 0.35)
    if suggested:
        add(suggested, "the compiler's suggestion", 0.6)
    for key in ("class", "scope"):
        value = captures.get(key)
        if value:
            parts = demangle_names(value)
            if parts:
                add(parts[-1], key, 0.4)
    dtype = captures.get("dtype")
    if dtype:
        short = dtype.rsplit(".", 1)[-1]
        name = _DTYPE_ALIASES.get(short, short)
        if name not in seen:
            seen.add(name)
            clues.append(_SymbolClue(name, "dtype", 1.0, added_declaration=0.85))
    op = captures.get("op")
    if op:
        base = op.split("::")[-1].split(".")[0]
        add(base, "operator", 0.5)
    kernel = captures.get("kernel")
    if kernel:
        add(kernel, "kernel", 0.5)
    return clues


def _module_paths(module: str) -> tuple[str, ...]:
    base = module.replace(".", "/")
    return (base + ".py", base + "/__init__.py")


_QUOTED_MESSAGE = re.compile(r"(?:Error|Exception|error):\s*(.+)$")
# How pytest shows a tensor's or a device's backend: device='openreg:0', device(type='openreg'.
_BACKEND_NAME = re.compile(r"device(?:=|\(type=)'(\w+)[':]")


def clues_for(evidence: FailureEvidence) -> tuple[_Clue, ...]:
    """What in a commit would implicate it for this failure."""
    captures = evidence.captures
    clues: list[_Clue] = []
    header = captures.get("header")
    if header and evidence.subtype is Subtype.HEADER_MOVED:
        clues.append(_HeaderClue(source_paths_for_include(header), header, missing=True))
    located = _TORCH_INCLUDE.search(captures.get("file", "")) or _TORCH_INCLUDE.search(
        evidence.line)
    if located:
        clues.append(_HeaderClue(source_paths_for_include(located.group(1)),
                                 located.group(1), missing=False))
    clues.extend(_symbol_clues(captures))
    module = captures.get("module")
    if module and evidence.subtype is Subtype.SYMBOL_REMOVED:
        clues.append(_FileClue(_module_paths(module), 0.35,
                               f"the module `{module}` the failure names"))
    message = _QUOTED_MESSAGE.search(evidence.line)
    if message:
        clues.append(_MessageClue(message.group(1)))
    standard = captures.get("standard")
    if standard:
        digits = re.sub(r"\D", "", standard)
        tokens = [f"C++{digits}", f"c++{digits}", f"CMAKE_CXX_STANDARD {digits}",
                  f"cxx_std_{digits}"]
        if digits in _STANDARD_YEARS:
            tokens.append(_STANDARD_YEARS[digits])
        clues.append(_TokenClue(tuple(tokens), f"the {standard} requirement", 0.85))
    if evidence.subtype is Subtype.NEW_HOOK_REQUIRED:
        clues.append(_FileClue(_REGISTRATION_FILES, 0.3, "the PrivateUse1 registration API"))
        clues.append(_TokenClue(_REGISTRATION_CALLS, "a new call into the backend's hooks",
                                0.35))
    frames = evidence.frames
    for depth, frame in enumerate(reversed(frames)):
        # The innermost torch frame is where the behaviour changed most likely.
        weight = 0.45 if depth == 0 else 0.25
        clues.append(_FileClue((frame.path,), weight,
                               f"on the failing stack (`{frame.function}`)", frame.function))
    text = "\n".join((evidence.line, *evidence.context))
    backend = captures.get("backend") or next(
        (m.group(1) for m in _BACKEND_NAME.finditer(text)), None)
    if backend and f".is_{backend}" in text:
        # `Tensor.is_<backend>` is generated by torch for a renamed PrivateUse1 backend.
        clues.append(_FileClue(("torch/utils/backend_registration.py",), 0.4,
                               f"which generates `is_{backend}`"))
        clues.append(_SymbolClue("custom_backend_name", "the generated property's backend "
                                 "name", 0.5))
    return tuple(clues)


# ---------------------------------------------------------------------------- reverts

def _plain_title(title: str) -> str:
    title = _RELAND_TITLE.sub("", title)
    return re.sub(r"\s*\(#\d+\)\s*$", "", title).strip().lower()


def _reverts(commits: Sequence[UpstreamCommit]) -> tuple[dict[str, str], dict[str, str]]:
    """(cleared sha -> why, reland sha -> why) for the range, oldest first.

    A commit reverted later in the range cannot be the culprit (its change is undone), and
    neither can the revert itself; a later commit that relands it (the same PR merged again,
    or a new PR with the same title, "Reland" or not) is a suspect like any other.
    """
    by_sha = {c.sha: c for c in commits}
    position = {c.sha: i for i, c in enumerate(commits)}
    cleared: dict[str, str] = {}
    relands: dict[str, str] = {}
    for i, commit in enumerate(commits):
        m = _REVERT_OF.search(commit.message)
        target: UpstreamCommit | None = None
        if m:
            target = next((c for sha, c in by_sha.items() if sha.startswith(m.group(1))), None)
        if target is None:
            pr = _REVERTED_PR.search(commit.message)
            if pr:
                # The latest landing of that PR not already undone (a PR may land twice).
                target = next((c for c in reversed(commits[:i])
                               if c.pr == int(pr.group(1)) and c.sha not in cleared), None)
        if target is None or position[target.sha] > i:
            continue  # reverts something before the range: a real change, scored as such
        cleared[target.sha] = f"reverted by {commit.sha[:12]} later in the range"
        cleared[commit.sha] = f"reverts {target.sha[:12]}, which is in the range"
        title = _plain_title(target.title)
        for later in commits[i + 1:]:
            if later.sha in cleared:
                continue
            if (target.pr is not None and later.pr == target.pr) or (
                    _plain_title(later.title) == title):
                what = f"#{target.pr}" if target.pr is not None else target.sha[:12]
                relands[later.sha] = f"relands {what} after its revert"
                break
    # A reland that is itself reverted later stays cleared.
    for sha in list(relands):
        if sha in cleared:
            del relands[sha]
    return cleared, relands


# ---------------------------------------------------------------------------- ranking

MAX_SUSPECTS = 10
# A suspect's evidence must be worth at least this much to be listed at all (a docs page
# that mentions the symbol in passing is not a suspect).
MIN_SCORE = 0.05


def _confidence(suspects: Sequence[Suspect]) -> Confidence:
    if not suspects:
        return Confidence.NO_SUSPECT
    top = suspects[0].score
    runner_up = suspects[1].score if len(suspects) > 1 else 0.0
    if top >= 0.8 and top - runner_up >= 0.15:
        return Confidence.HIGH
    if top >= 0.5:
        return Confidence.MEDIUM
    return Confidence.LOW


class RangeIndex:
    """A regression range indexed once, to be scored against any number of failures."""

    def __init__(self, commits: Sequence[UpstreamCommit]) -> None:
        self.commits = tuple(commits)
        self._index = tuple(_CommitIndex(c) for c in self.commits)
        self.cleared, self.relands = _reverts(self.commits)

    def rank(self, failures: Sequence[FailureEvidence],
             limit: int = MAX_SUSPECTS) -> CulpritRanking:
        clue_sets = [clues_for(f) for f in failures]
        suspects: list[tuple[float, int, Suspect]] = []
        for position, indexed in enumerate(self._index):
            commit = indexed.commit
            if commit.sha in self.cleared:
                continue
            miss = 1.0  # noisy-OR over failures, each itself a noisy-OR over its clues
            reasons: list[str] = []
            for clues in clue_sets:
                failure_miss = 1.0
                for clue in clues:
                    hit = clue.match(indexed)
                    if hit is None or hit.weight <= 0:
                        continue
                    failure_miss *= 1.0 - min(hit.weight, 0.99)
                    if hit.reason not in reasons:
                        reasons.append(hit.reason)
                miss *= failure_miss
            score = round(1.0 - miss, 4)
            if score < MIN_SCORE:
                continue
            if commit.sha in self.relands:
                reasons.append(self.relands[commit.sha])
            # Equal scores keep range order, so the ranking depends on nothing but the input.
            # The PR is its own field: the title reads as the PR's.
            title = _PR_SUFFIX.sub("", commit.title) if commit.pr else commit.title
            suspects.append((score, position,
                             Suspect(commit.sha, commit.pr, title, score, tuple(reasons))))
        suspects.sort(key=lambda s: (-s[0], s[1]))
        ranked = tuple(s for _, _, s in suspects[:limit])
        return CulpritRanking(
            suspects=ranked,
            confidence=_confidence(ranked),
            commits_considered=len(self.commits),
            cleared=tuple((c.sha, self.cleared[c.sha]) for c in self.commits
                          if c.sha in self.cleared),
        )


def rank_culprits(failures: Sequence[FailureEvidence], commits: Sequence[UpstreamCommit],
                  limit: int = MAX_SUSPECTS) -> CulpritRanking:
    """The suspects of a breakage among ``commits`` (oldest first), best first."""
    return RangeIndex(commits).rank(failures, limit)
