"""The rules engine: find the decisive line of a build/import/test/provision log.

``classify_log(text, stage) -> Finding | None``

- ``text`` may be ``str`` or ``bytes`` (decoded as UTF-8, undecodable bytes replaced).
- Returns None when nothing in the log matches a rule (an empty log, a clean log).
- The decisive line is, by rule weight (see rules.toml): the first *dominant* line (disk
  full, killed compiler, C++ standard); else the first *normal* line (the first compiler
  error of the first failing translation unit, the first failing test); else the
  highest-priority *fallback* line ("CMake Error", "ninja: build stopped", ...).
- The returned Finding carries its fingerprint.

Cost: ``str.find`` (C, memory speed) looks for each of the few [scan] anchors of
rules.toml, a block of the log at a time; Python only looks at the lines they hit, and the
scan for normal lines stops at the first one. A regex alternation of the literals would be
~10x slower: CPython's regex engine tries every branch at every position.
Lines longer than LINE_CAP (binary junk, minified output) are looked at in LINE_CAP windows
around the hit, and every context/probe read is bounded, so no input is quadratic.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from service.domain.classify.rules import Rule, RuleSet, Weight, default_rules
from service.domain.fingerprint import with_fingerprint
from service.domain.verdict import Finding, Stage

LINE_CAP = 2000
CONTEXT_BEFORE = 5
CONTEXT_AFTER = 8
CONTEXT_LINE_CAP = 400
# Probes (follow/before) and context never read more than this many characters.
LOOK_CAP = 256 * 1024
# For an overlong line, how much before the trigger hit is kept.
OVERLONG_LEAD = 256
# Anchors are searched a block at a time so the scan can stop early.
BLOCK = 1 << 20

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_ALL = frozenset(Weight)
_DOMINANT = frozenset({Weight.DOMINANT})


def clean_line(raw: str) -> str:
    """What a terminal would show: colours removed, a carriage return (progress bars)
    leaves only what was written after it."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    raw = raw.rstrip("\r")
    if "\r" in raw:
        raw = raw.rsplit("\r", 1)[-1]
    if "\x00" in raw:
        raw = raw.replace("\x00", "")
    return raw


def _anchor_hits(text: str, anchors: tuple[str, ...], start: int) -> Iterator[int]:
    """Positions of anchors from ``start`` on, in increasing order; on an ordinary line only
    the first occurrence of each anchor is reported (the whole line is looked at anyway)."""
    size = len(text)
    pos = start
    while pos < size:
        nl = text.find("\n", min(size, pos + BLOCK), min(size, pos + BLOCK + LINE_CAP))
        end = nl + 1 if nl >= 0 else min(size, pos + BLOCK + LINE_CAP)
        found: list[int] = []
        for anchor in anchors:
            i = text.find(anchor, pos, end)
            while i >= 0:
                found.append(i)
                eol = text.find("\n", i, min(end, i + LINE_CAP))
                i = text.find(anchor, eol if eol >= 0 else i + len(anchor), end)
        found.sort()
        yield from found
        pos = end


def _cap(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[:limit] + " [...]"


@dataclass(frozen=True)
class _Hit:
    rule: Rule
    priority: int
    start: int
    end: int
    line: str
    line_number: int
    captures: dict[str, str]


class _Scanner:
    def __init__(self, text: str, ruleset: RuleSet, stage: Stage,
                 evidence: bool = False) -> None:
        self.text = text
        self.ruleset = ruleset
        self.stage = stage
        self.evidence = evidence
        self.rules = ruleset.for_stage(stage, evidence)
        self.by_anchor = ruleset.rules_by_anchor(stage, evidence)
        self._count_pos = 0
        self._count_lines = 1

    def _line_number(self, pos: int) -> int:
        # Hits arrive in increasing order, so counting newlines incrementally is linear.
        self._count_lines += self.text.count("\n", self._count_pos, pos)
        self._count_pos = pos
        return self._count_lines

    def _bounds(self, hit: int, floor: int) -> tuple[int, int]:
        text = self.text
        lo = max(0, hit - LINE_CAP)
        nl = text.rfind("\n", lo, hit)
        start = nl + 1 if nl >= 0 or lo == 0 else max(hit - OVERLONG_LEAD, floor)
        nl = text.find("\n", hit, start + LINE_CAP)
        end = nl if nl >= 0 else min(len(text), start + LINE_CAP)
        return start, end

    def _match(
        self, start: int, end: int, weights: frozenset[Weight], fallback_floor: int
    ) -> _Hit | None:
        """The first rule matching this line; fallback rules at or below the priority of
        the fallback already found are skipped (they could not win)."""
        line = clean_line(self.text[start:end])
        candidates: set[int] = set()
        for anchor, ids in self.by_anchor:
            if anchor in line:
                candidates |= ids
        for priority in sorted(candidates):
            rule = self.rules[priority]
            if rule.weight not in weights or (
                rule.weight is Weight.FALLBACK and priority >= fallback_floor
            ):
                continue
            if not rule.triggered_by(line):
                continue
            for pattern in rule.patterns:
                m = pattern.search(line)
                if m is None:
                    continue
                captures = {k: v for k, v in m.groupdict().items() if v is not None}
                # Probes first: a requirement may be on what a note line names.
                self._probe(rule, start, end, captures)
                if all(
                    name in captures and req.search(captures[name])
                    for name, req in rule.requires.items()
                ):
                    for name, value in rule.sets.items():
                        captures.setdefault(name, value)
                    return _Hit(rule, priority, start, end, line,
                                self._line_number(start), captures)
        return None

    def _probe(self, rule: Rule, start: int, end: int, captures: dict[str, str]) -> None:
        if rule.follow is not None:
            lines = self._after(end, rule.follow.within)
            self._apply(rule.follow.patterns, lines, captures)
        if rule.before is not None:
            lines = self._before(start, rule.before.within)
            self._apply(rule.before.patterns, reversed(lines), captures)

    @staticmethod
    def _apply(
        patterns: tuple[re.Pattern[str], ...], lines: Iterable[str], captures: dict[str, str]
    ) -> None:
        # The nearest matching line wins; what the decisive line itself captured is kept.
        for line in lines:
            for pattern in patterns:
                m = pattern.search(line)
                if m:
                    for k, v in m.groupdict().items():
                        if v is not None:
                            captures.setdefault(k, v)
                    return

    def _after(self, end: int, n: int) -> list[str]:
        if end >= len(self.text):
            return []
        region = self.text[end + 1 : end + 1 + LOOK_CAP]
        lines = region.split("\n", n)[:n]
        return [_cap(clean_line(x), LINE_CAP) for x in lines]

    def _before(self, start: int, n: int) -> list[str]:
        if start == 0:
            return []
        region = self.text[max(0, start - LOOK_CAP) : start - 1]
        lines = region.rsplit("\n", n)[-n:]
        return [_cap(clean_line(x), LINE_CAP) for x in lines]

    def decisive(self) -> _Hit | None:
        anchors = self.ruleset.anchors_for(self.stage, _ALL, self.evidence)
        fallback: _Hit | None = None
        normal: _Hit | None = None
        resume = 0
        for pos in _anchor_hits(self.text, anchors, 0):
            if pos < resume:
                continue  # this line was already looked at
            start, end = self._bounds(pos, resume)
            resume = end + 1
            hit = self._match(start, end, _ALL,
                              len(self.rules) if fallback is None else fallback.priority)
            if hit is None:
                continue
            if hit.rule.weight is Weight.DOMINANT:
                return hit
            if hit.rule.weight is Weight.NORMAL:
                normal = hit
                break
            fallback = hit  # _match only returns a fallback that beats the current one
        if normal is None:
            return fallback
        # A normal line decided; only a dominant line further down can still overrule it.
        for pos in _anchor_hits(self.text, self.ruleset.anchors_for(self.stage, _DOMINANT,
                                                                       self.evidence),
                                resume):
            if pos < resume:
                continue
            start, end = self._bounds(pos, resume)
            resume = end + 1
            hit = self._match(start, end, _DOMINANT, 0)
            if hit is not None:
                return hit
        return normal

    def finding(self, hit: _Hit) -> Finding:
        return Finding(
            category=hit.rule.category,
            subtype=hit.rule.subtype,
            rule=hit.rule.name,
            stage=self.stage,
            line=_cap(hit.line, LINE_CAP),
            line_number=hit.line_number,
            context_before=tuple(
                _cap(x, CONTEXT_LINE_CAP) for x in self._before(hit.start, CONTEXT_BEFORE)
            ),
            context_after=tuple(
                _cap(x, CONTEXT_LINE_CAP) for x in self._after(hit.end, CONTEXT_AFTER)
            ),
            captures=dict(hit.captures),
            explanation=hit.rule.explanation,
        )


def _as_text(text: str | bytes) -> str:
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return text


def find_decisive(
    text: str | bytes, stage: Stage, *, rules: RuleSet | None = None,
    evidence: str | None = None,
) -> Finding | None:
    """The decisive finding without a fingerprint (for callers that amend captures).

    ``evidence`` is what the worker itself recorded about the step's sandbox (a step's
    summary: bwrap's set-up failure, the disk budget's trip), never the step's output: the
    ``evidence = "sandbox"`` rules read only it, and they win over the log. The log is
    read with every other rule, so a line the step printed to look like the sandbox's
    never decides."""
    ruleset = rules or default_rules()
    if evidence:
        witness = _Scanner(_as_text(evidence), ruleset, stage, evidence=True)
        hit = witness.decisive()
        if hit is not None:
            # Not a line of the log: no line number, no context.
            return replace(witness.finding(hit), line_number=0, context_before=(),
                           context_after=())
    body = _as_text(text)
    if not body:
        return None
    scanner = _Scanner(body, ruleset, stage)
    hit = scanner.decisive()
    return None if hit is None else scanner.finding(hit)


def classify_log(
    text: str | bytes, stage: Stage, *, rules: RuleSet | None = None,
    evidence: str | None = None,
) -> Finding | None:
    """The decisive finding of a log, fingerprinted; None if no rule matches. ``evidence``:
    the worker's own record of the step's sandbox (``find_decisive``)."""
    finding = find_decisive(text, stage, rules=rules, evidence=evidence)
    return None if finding is None else with_fingerprint(finding)
