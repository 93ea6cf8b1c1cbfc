"""Loading and validating the classification rules (``rules.toml``).

The rules are data; this module turns them into compiled, typed ``Rule`` objects and
refuses a malformed file with a message naming the rule and the field, so a bad edit
fails at load time instead of silently misclassifying.
"""

from __future__ import annotations

import enum
import hashlib
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from service.domain.verdict import Category, Stage, Subtype


class RuleError(ValueError):
    """rules.toml is malformed; the message names the rule and the field."""


class Weight(enum.StrEnum):
    DOMINANT = "dominant"
    NORMAL = "normal"
    FALLBACK = "fallback"


@dataclass(frozen=True)
class Probe:
    """Patterns searched in the lines around a matched line to add captures."""

    within: int
    patterns: tuple[re.Pattern[str], ...]


@dataclass(frozen=True, eq=False)
class Rule:
    name: str
    category: Category
    subtype: Subtype
    stages: frozenset[Stage]
    weight: Weight
    triggers: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    requires: Mapping[str, re.Pattern[str]]
    follow: Probe | None
    before: Probe | None
    explanation: str
    # Captures the rule knows without reading them (the standard a C++20-only name needs);
    # what the log itself says wins.
    sets: Mapping[str, str] = field(default_factory=dict)
    # ``evidence = "sandbox"``: the rule reads only what the worker itself recorded about
    # the step's sandbox (``find_decisive(evidence=...)``), never the log or a test's
    # message, which the step's own code writes and could forge.
    evidence: bool = False

    def triggered_by(self, line: str) -> bool:
        return any(t in line for t in self.triggers)


# Identity equality/hash: a RuleSet is the key of the per-stage caches below.
@dataclass(frozen=True, eq=False)
class RuleSet:
    """Rules in priority order, and the anchors that find their candidate lines."""

    rules: tuple[Rule, ...]
    anchors: tuple[str, ...]
    # sha256 of the rules text (16 hex): store it next to verdicts, and `ootci reclassify`
    # can tell which rows a rules change may have made stale.
    digest: str = ""

    def for_stage(self, stage: Stage, evidence: bool = False) -> tuple[Rule, ...]:
        """The stage's rules read from a log (or, ``evidence``, from the worker's record)."""
        return _stage_rules(self, stage, evidence)

    def rules_by_anchor(
        self, stage: Stage, evidence: bool = False
    ) -> tuple[tuple[str, frozenset[int]], ...]:
        """For each anchor, the positions (in ``for_stage``) of the rules it can trigger: a
        candidate line only tries the rules of the anchors it contains."""
        return _rules_by_anchor(self, stage, evidence)

    def anchors_for(
        self, stage: Stage, weights: frozenset[Weight], evidence: bool = False
    ) -> tuple[str, ...]:
        """The anchors a scan for these rules needs: str.find runs at memory speed, one
        regex alternation of many literals does not, so fewer anchors is a faster scan."""
        return _anchors_for(self, stage, weights, evidence)


@cache
def _stage_rules(ruleset: RuleSet, stage: Stage, evidence: bool) -> tuple[Rule, ...]:
    return tuple(r for r in ruleset.rules if stage in r.stages and r.evidence is evidence)


@cache
def _rules_by_anchor(
    ruleset: RuleSet, stage: Stage, evidence: bool
) -> tuple[tuple[str, frozenset[int]], ...]:
    rules = _stage_rules(ruleset, stage, evidence)
    index = []
    for anchor in ruleset.anchors:
        ids = frozenset(i for i, r in enumerate(rules) if any(anchor in t for t in r.triggers))
        if ids:
            index.append((anchor, ids))
    return tuple(index)


def anchor_of(trigger: str, anchors: Sequence[str]) -> str | None:
    return next((a for a in anchors if a in trigger), None)


@cache
def _anchors_for(
    ruleset: RuleSet, stage: Stage, weights: frozenset[Weight], evidence: bool
) -> tuple[str, ...]:
    needed = {
        anchor_of(t, ruleset.anchors)
        for r in _stage_rules(ruleset, stage, evidence)
        if r.weight in weights
        for t in r.triggers
    }
    return tuple(a for a in ruleset.anchors if a in needed)


def _compile(rule: str, field: str, pattern: Any) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise RuleError(f"rule {rule!r}: {field} must be a non-empty regex string")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise RuleError(f"rule {rule!r}: {field} is not a valid regex: {exc}") from exc


def _str_list(rule: str, field: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(
        isinstance(v, str) and v for v in value
    ):
        raise RuleError(f"rule {rule!r}: {field} must be a non-empty list of strings")
    return tuple(value)


def _probe(rule: str, field: str, value: Any) -> Probe | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("within"), int):
        raise RuleError(f"rule {rule!r}: {field} needs an integer 'within' and 'patterns'")
    if not 0 < value["within"] <= 1000:
        raise RuleError(f"rule {rule!r}: {field}.within must be in 1..1000")
    pats = _str_list(rule, f"{field}.patterns", value.get("patterns"))
    return Probe(value["within"], tuple(_compile(rule, f"{field}.patterns", p) for p in pats))


def _enum(rule: str, field: str, kind: type[enum.StrEnum], value: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise RuleError(f"rule {rule!r}: {field}={value!r} is not one of {allowed}") from None


def _parse_rule(index: int, raw: Mapping[str, Any]) -> Rule:
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise RuleError(f"rule #{index + 1}: missing 'name'")
    known = {"name", "category", "subtype", "stages", "weight", "triggers", "patterns",
             "requires", "follow", "before", "explain", "sets", "evidence"}
    unknown = set(raw) - known
    if unknown:
        raise RuleError(f"rule {name!r}: unknown field(s) {sorted(unknown)}")
    patterns = tuple(
        _compile(name, "patterns", p) for p in _str_list(name, "patterns", raw.get("patterns"))
    )
    follow = _probe(name, "follow", raw.get("follow"))
    before = _probe(name, "before", raw.get("before"))
    requires_raw = raw.get("requires", {})
    if not isinstance(requires_raw, dict):
        raise RuleError(f"rule {name!r}: requires must be a table capture -> regex")
    probes = [p for probe in (follow, before) if probe for p in probe.patterns]
    groups = {g for p in (*patterns, *probes) for g in p.groupindex}
    for capture in requires_raw:
        if capture not in groups:
            raise RuleError(f"rule {name!r}: requires names {capture!r}, not a pattern group")
    sets = raw.get("sets", {})
    if not isinstance(sets, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in sets.items()
    ):
        raise RuleError(f"rule {name!r}: sets must be a table capture -> non-empty string")
    evidence = raw.get("evidence")
    if evidence not in (None, "sandbox"):
        raise RuleError(f"rule {name!r}: evidence={evidence!r} is not 'sandbox'")
    explanation = raw.get("explain")
    if not isinstance(explanation, str) or not explanation:
        raise RuleError(f"rule {name!r}: 'explain' (one human sentence) is required")
    return Rule(
        name=name,
        category=_enum(name, "category", Category, raw.get("category")),
        subtype=_enum(name, "subtype", Subtype, raw.get("subtype")),
        stages=frozenset(
            _enum(name, "stages", Stage, s) for s in _str_list(name, "stages", raw.get("stages"))
        ),
        weight=_enum(name, "weight", Weight, raw.get("weight", "normal")),
        triggers=_str_list(name, "triggers", raw.get("triggers")),
        patterns=patterns,
        requires={k: _compile(name, f"requires.{k}", v) for k, v in requires_raw.items()},
        follow=follow,
        before=before,
        explanation=explanation,
        sets=dict(sets),
        evidence=evidence == "sandbox",
    )


def parse_rules(text: str) -> RuleSet:
    """Parse a rules.toml document; raises RuleError on any problem."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleError(f"rules file is not valid TOML: {exc}") from exc
    raw_rules = doc.get("rule")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise RuleError("rules file has no [[rule]] entries")
    scan = doc.get("scan", {})
    anchors = scan.get("anchors") if isinstance(scan, dict) else None
    if not isinstance(anchors, list) or not anchors or not all(
        isinstance(a, str) and a for a in anchors
    ):
        raise RuleError("rules file needs [scan] anchors = a non-empty list of strings")
    rules: Sequence[Rule] = [_parse_rule(i, r) for i, r in enumerate(raw_rules)]
    seen: set[str] = set()
    for rule in rules:
        if rule.name in seen:
            raise RuleError(f"rule {rule.name!r} is defined twice")
        seen.add(rule.name)
        for trigger in rule.triggers:
            # A trigger without an anchor would never be scanned for: refuse it here.
            if anchor_of(trigger, anchors) is None:
                raise RuleError(
                    f"rule {rule.name!r}: trigger {trigger!r} contains none of the [scan] "
                    f"anchors; add an anchor or reword the trigger"
                )
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return RuleSet(tuple(rules), tuple(anchors), digest)


@cache
def default_rules() -> RuleSet:
    """The packaged rules (read once per process)."""
    text = resources.files("service.domain.classify").joinpath("rules.toml").read_text("utf-8")
    return parse_rules(text)
