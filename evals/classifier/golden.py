"""Golden logs of live mutant runs (``evals/data/mutants/<mutant>.log``).

The header follows tests/fixtures/logs/README.md (``# expect:``, ``# capture:``, notes,
``# ---``), with one addition for failures that came from a test record rather than a step
log: ``# test: nodeid=<id> outcome=<outcome>``; such a body is the record's message and
traceback and is classified as the pipeline classifies a failed test.

The ``expect:`` line carries the verdict the mutant is *built* to produce (the catalogue's),
so a misclassified live run yields a fixture that keeps failing until the rules are fixed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from evals.mutants.mutant import Mutant
from service.domain.classify import classify_log, classify_test_failure
from service.domain.verdict import Finding, Stage

END_OF_HEADER = "# ---\n"
MAX_BYTES = 200 * 1024
# Lines kept around the decisive line / the first error line of a step log.
BEFORE, AFTER = 40, 60
FIRST_ERROR_CONTEXT = 20
# Captures naming where the failure happened on this machine, not what broke.
LOCATION_CAPTURES = frozenset({"file", "library"})
_OMITTED = "[ootci: {n} lines omitted]"
# A compiler/Python error line (not a file that happens to be called errors.cpp).
_ERROR_LINE = re.compile(r"\berror:|\w(?:Error|Exception): |^E +\S|^Traceback \(most recent")


@dataclass
class GoldenLog:
    path: Path
    expect: dict[str, str]
    captures: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    test: dict[str, str] = field(default_factory=dict)  # nodeid, outcome
    body: str = ""

    @property
    def name(self) -> str:
        return self.path.stem

    def classify(self) -> Finding | None:
        stage = Stage(self.expect["stage"])
        if self.test:
            return classify_test_failure(
                self.test["nodeid"], self.body, None, stage, outcome=self.test.get("outcome")
            )
        return classify_log(self.body, stage)

    def render(self) -> str:
        keys = ("stage", "category", "subtype", "rule")
        lines = ["# expect: " + " ".join(f"{k}={self.expect[k]}" for k in keys)]
        lines += [f"# capture: {k} = {v}" for k, v in self.captures.items()]
        lines += self.notes
        if self.test:
            lines.append("# test: " + " ".join(f"{k}={v}" for k, v in self.test.items()))
        return "\n".join(lines) + "\n" + END_OF_HEADER + self.body


def load(path: Path) -> GoldenLog:
    text = path.read_text(encoding="utf-8", errors="replace")
    head, sep, body = text.partition(END_OF_HEADER)
    if not sep:
        raise ValueError(f"{path.name}: no '# ---' line ends the header")
    golden = GoldenLog(path, {}, body=body)
    for line in head.splitlines():
        if line.startswith("# expect:"):
            for pair in line.removeprefix("# expect:").split():
                key, _, value = pair.partition("=")
                golden.expect[key] = value
        elif line.startswith("# capture:"):
            key, _, value = line.removeprefix("# capture:").partition(" = ")
            golden.captures[key.strip()] = value
        elif line.startswith("# test:"):
            for pair in line.removeprefix("# test:").split():
                key, _, value = pair.partition("=")
                golden.test[key] = value
        else:
            golden.notes.append(line)
    missing = {"stage", "category", "subtype", "rule"} - set(golden.expect)
    if missing:
        raise ValueError(f"{path.name}: expect line lacks {sorted(missing)}")
    return golden


def _regions(lines: list[str], spans: list[tuple[int, int]]) -> str:
    """The given [start, end) line spans, merged, with a marker for each gap."""
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        start, end = max(0, start), min(len(lines), end)
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out: list[str] = []
    cursor = 0
    for start, end in merged:
        if start > cursor:
            out.append(_OMITTED.format(n=start - cursor))
        out.extend(lines[start:end])
        cursor = end
    if cursor < len(lines):
        out.append(_OMITTED.format(n=len(lines) - cursor))
    return "\n".join(out) + "\n"


def _first_error_line(lines: list[str]) -> int | None:
    for i, line in enumerate(lines):
        if _ERROR_LINE.search(line):
            return i
    return None


def excerpt_log(text: str, decisive_line: int) -> str:
    """The head of a step log (which torch, which command), the decisive line with
    BEFORE/AFTER lines around it and the first error region, capped at MAX_BYTES."""
    lines = text.splitlines()
    spans = [(0, 8)]
    if decisive_line > 0:
        spans.append((decisive_line - 1 - BEFORE, decisive_line - 1 + AFTER))
    first = _first_error_line(lines)
    if first is not None:
        spans.append((first - FIRST_ERROR_CONTEXT, first + FIRST_ERROR_CONTEXT))
    return cap(_regions(lines, spans))


def cap(text: str) -> str:
    """At most MAX_BYTES, keeping the start and the end (where causes and tracebacks are)."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= MAX_BYTES:
        return text
    half = (MAX_BYTES - 200) // 2
    head = data[:half].decode("utf-8", errors="ignore")
    tail = data[-half:].decode("utf-8", errors="ignore")
    return head.rsplit("\n", 1)[0] + "\n" + _OMITTED.format(n="some") + "\n" + \
        tail.split("\n", 1)[-1]


def make_golden(
    path: Path, mutant: Mutant, finding: Finding, body: str, *,
    test: dict[str, str] | None = None, made_by: str,
) -> GoldenLog:
    """A golden log for ``mutant`` from the body that produced ``finding``."""
    e = mutant.expect
    return GoldenLog(
        path,
        {"stage": e.stage.value, "category": e.category.value, "subtype": e.subtype.value,
         "rule": finding.rule},
        # Only right captures become exact expectations; a wrong one must not be blessed.
        captures={k: v for k, v in finding.captures.items()
                  if k not in LOCATION_CAPTURES and k in e.captures
                  and re.search(e.captures[k], v)},
        notes=[f"# imitates: {mutant.imitates}"
               + (f" (pytorch/pytorch#{mutant.pr})" if mutant.pr else ""),
               f"# made by: {made_by}"],
        test=dict(test or {}),
        body=body,
    )


def golden_path(directory: Path, mutant: Mutant) -> Path:
    return directory / f"{mutant.name}.log"
