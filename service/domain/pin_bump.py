"""The weekly pin-bump recommendation: given a backend's current upstream pin, the newest
upstream build it passed on (nightly/pin tracks only), and the breakages still open since,
bump or hold, and why, in one line. Pure: the evidence comes from ``service/queries``.

The rule, after PyTorch's own pin-update bot (which bumps a pin only when CI is green at
the new commit):

- **bump** when the newest green build is newer than the pin: propose it as a spec that
  resolves to the same wheel again (``nightly:DATE``, never the moving ``nightly``);
- **hold** otherwise: the pin is already the newest green build, or nothing newer passed;
  the reason names the oldest open breakage since the pin (what, since when, top suspect).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field

from service.domain.torch_spec import (
    SourceKind,
    TorchSpecError,
    nightly_date_of,
    parse_spec,
)

BUMP, HOLD = "bump", "hold"


@dataclass(frozen=True)
class UpstreamBuild:
    """A torch build as the report names it."""

    spec: str  # reproducible: resolves to this build again
    version: str
    git_version: str = ""
    run_id: int | None = None  # the green run that is the evidence
    # A nightly:DATE pin never provisioned yet: its date is known, its version not.
    pinned_date: dt.date | None = None

    @property
    def date(self) -> dt.date | None:
        return self.pinned_date or nightly_date_of(self.version)


@dataclass(frozen=True)
class Suspect:
    pr: int | None
    sha: str
    score: float
    title: str = ""

    def describe(self) -> str:
        who = f"#{self.pr}" if self.pr else self.sha[:12]
        return f"suspect {who} ({self.score:.2f})"


@dataclass(frozen=True)
class OpenBreakage:
    id: int
    title: str
    kind: str  # "<category>/<subtype>" or what is known of it
    since: dt.date
    suspects: tuple[Suspect, ...] = ()

    def describe(self) -> str:
        text = f"{self.kind} since {self.since.isoformat()} (breakage {self.id})"
        return f"{text}, {self.suspects[0].describe()}" if self.suspects else text


@dataclass(frozen=True)
class Recommendation:
    action: str  # bump | hold
    spec: str | None  # the proposed pin (bump only)
    reason: str
    breakages: tuple[OpenBreakage, ...] = field(default_factory=tuple)


def reproducible_spec(spec: str, source_kind: str, version: str, git_version: str) -> str | None:
    """A spec that provisions this build again, or None (an ``installed`` or ``path:``
    torch is whatever that machine has). A nightly is named by its date; a pip/wheel spec
    that already pins upstream stays as written; else the commit it was built from."""
    date = nightly_date_of(version)
    if date is not None and source_kind in {SourceKind.NIGHTLY, SourceKind.COMMIT, SourceKind.PIP}:
        return f"nightly:{date.isoformat()}"
    try:
        parsed = parse_spec(spec)
    except TorchSpecError:
        parsed = None
    if parsed is not None and parsed.pins_upstream and parsed.kind is not SourceKind.PATH:
        return spec
    if source_kind in {SourceKind.NIGHTLY, SourceKind.COMMIT} and git_version:
        return f"commit:{git_version}"
    return None


def is_newer(candidate: UpstreamBuild, pin: UpstreamBuild | None, pin_text: str | None) -> bool:
    """Whether the green build is past the pin. Nightly dates order builds; without them a
    different version than the pin's counts as newer only when the pin is unknown."""
    if pin_text and candidate.spec == pin_text:
        return False
    if pin is None:
        return True
    if candidate.date and pin.date:
        return candidate.date > pin.date
    return candidate.version != pin.version and candidate.git_version != pin.git_version


def recommend(
    pin_text: str | None,
    pin: UpstreamBuild | None,
    green: UpstreamBuild | None,
    breakages: Sequence[OpenBreakage],
) -> Recommendation:
    ordered = tuple(sorted(breakages, key=lambda b: (b.since, b.id)))
    broken = _broken_note(ordered)
    if green is None:
        return Recommendation(
            HOLD, None, "hold: no nightly/pin run has passed yet" + (f"; {broken}" if broken else ""),
            ordered,
        )
    if is_newer(green, pin, pin_text):
        evidence = f" (torch {green.version}, passed in run {green.run_id})" if green.run_id else ""
        after = [b for b in ordered if green.date is None or b.since > green.date]
        tail = f"; newer builds broke: {_broken_note(tuple(after))}" if after else ""
        return Recommendation(BUMP, green.spec, f"bump to {green.spec}{evidence}{tail}", ordered)
    if broken:
        return Recommendation(HOLD, None, f"hold: {broken}", ordered)
    return Recommendation(
        HOLD, None, f"hold: the pin {pin_text} is the newest build that passed", ordered
    )


def _broken_note(breakages: tuple[OpenBreakage, ...]) -> str:
    if not breakages:
        return ""
    more = f" (+{len(breakages) - 1} more open)" if len(breakages) > 1 else ""
    return breakages[0].describe() + more


@dataclass(frozen=True)
class ReportView:
    """One stored report as the Markdown, the page and the bump PR show it."""

    backend: str
    week: dt.date
    current_pin: str | None
    current_version: str | None
    green: UpstreamBuild | None
    action: str
    proposed_spec: str | None
    reason: str
    breakages: tuple[OpenBreakage, ...] = ()
    bump_pr_url: str | None = None


def render_markdown(views: Sequence[ReportView], *, title: str = "Weekly PyTorch pin report") -> str:
    """The report as Markdown: one section per backend and week."""
    lines = [f"# {title}", ""]
    for view in views:
        lines += [f"## {view.backend}: week of {view.week.isoformat()}", ""]
        lines.append(f"**{view.action.upper()}**: {view.reason}")
        lines.append("")
        current = view.current_pin or "(none configured)"
        if view.current_version:
            current += f" (torch {view.current_version})"
        lines.append(f"- current pin: `{current}`")
        if view.green is not None:
            run = f", run {view.green.run_id}" if view.green.run_id else ""
            lines.append(
                f"- newest green: `{view.green.spec}` (torch {view.green.version}"
                f"{', ' + view.green.git_version[:12] if view.green.git_version else ''}{run})"
            )
        else:
            lines.append("- newest green: none on the nightly/pin tracks")
        if view.bump_pr_url:
            lines.append(f"- bump PR: {view.bump_pr_url}")
        if view.breakages:
            lines += ["", "| breakage | what | since | suspects |", "|---|---|---|---|"]
            for b in view.breakages:
                suspects = ", ".join(s.describe().removeprefix("suspect ") for s in b.suspects) or "none ranked"
                title = b.title.replace("|", "\\|")[:120]
                lines.append(f"| {b.id}: {title} | {b.kind} | {b.since.isoformat()} | {suspects} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
