"""The one comment ootci keeps on a suspected upstream PR: what it renders, and the
marker that finds it again.

Dr.CI's habit: one comment per PR, found by a hidden marker and edited in place on every
later night (more backends, more occurrences, resolved), never a second one. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.domain.verification import VerifyState, is_confirmed

MARKER = "<!-- ootci:culprit-report -->"


@dataclass(frozen=True)
class BreakageReport:
    """One breakage that names this PR as its top suspect."""

    breakage_id: int
    backend: str
    category: str
    subtype: str | None
    title: str
    decisive_line: str
    base_version: str | None
    head_version: str | None
    base_sha: str | None
    head_sha: str | None
    occurrences: int
    resolved: bool
    score: float
    reasons: tuple[str, ...]
    url: str | None
    # The suspect's verification by undoing it (service.domain.verification): its state
    # and evidence; None when none has run.
    verification: str | None = None
    evidence: str | None = None
    # "Not this PR": who said so for this breakage, and why; the PR is no longer its suspect.
    disputed_by: str | None = None
    dispute_reason: str | None = None

    @property
    def accuses(self) -> bool:
        """Whether this report still holds the PR responsible for an open break."""
        return not self.resolved and self.disputed_by is None

    @property
    def confirmed(self) -> bool:
        return self.verification == "confirmed"

    def verdict_line(self) -> str:
        """What the experiment says, in the words an upstream author reads first."""
        if self.confirmed and self.evidence:
            return f"**confirmed**: {self.evidence}"
        why = self.evidence if self.verification and self.evidence else "no verification has run"
        return f"**suspected** (not verified: {why})"


@dataclass(frozen=True)
class QuarantinedFailure:
    """A failure of a red run that is quarantined as flaky: shown on the comment, apart,
    so nobody reads it as what this PR broke (it opens no breakage)."""

    backend: str
    run_id: int
    nodeid: str | None
    line: str
    url: str | None = None


def pr_page_url(public_url: str, pr: int) -> str | None:
    """The PR's page under OOTCI_PUBLIC_URL, the only base a published link has (None when
    unset: a comment without the link rather than one to an internal address)."""
    return f"{public_url.rstrip('/')}/prs/{pr}" if public_url else None


def unreported_reason(suspects: Sequence[Mapping[str, Any]], min_score: float) -> str:
    """Why no report went to GitHub for a breakage with this ranking, in the words the
    breakage page shows. Mirrors ``service.commands.culprits.reported_pr``: the first
    suspect no verification refuted is reported when it has a PR and is confirmed or
    scores at least ``min_score``."""
    if not suspects:
        return "there is no suspect to tell"
    top = next((s for s in suspects
                if (s.get("verification") or {}).get("state") != VerifyState.REFUTED), None)
    if top is None:
        return "every suspect was refuted by undoing it"
    if top.get("pr") is None:
        return f"the top suspect {str(top.get('sha', '?'))[:10]} landed without a PR to comment on"
    score = float(top.get("score", 0))
    if not is_confirmed(top) and score < min_score:
        return f"the top suspect scores {score:.2f}, below OOTCI_CULPRIT_MIN_SCORE={min_score:g}"
    return (f"the top suspect #{top['pr']} (score {score:.2f}) is to be reported, but no report "
            "is queued yet (`ootci report BREAKAGE` queues one)")


def _short(sha: str | None) -> str:
    return (sha or "?")[:12]


def _range(report: BreakageReport) -> str:
    return (
        f"{report.base_version or '?'} (`{_short(report.base_sha)}`) → "
        f"{report.head_version or '?'} (`{_short(report.head_sha)}`)"
    )


def _fence(line: str) -> str:
    # A decisive line may itself contain backticks; a longer fence keeps it verbatim.
    fence = "```"
    while fence in line:
        fence += "`"
    return f"{fence}\n{line.strip()[:500]}\n{fence}"


def render(
    pr: int,
    reports: list[BreakageReport],
    *,
    page_url: str | None = None,
    quarantined: Sequence[QuarantinedFailure] = (),
) -> str:
    """The comment's whole body (marker first), newest state of every breakage; the PR's
    page when ``page_url`` (public) is given, and the red runs' quarantined failures in a
    section of their own."""
    open_ones = [r for r in reports if r.accuses]
    backends = sorted({r.backend for r in open_ones})
    if open_ones:
        head = (
            f"## ootci: this PR is the top suspect for {len(open_ones)} break"
            f"{'' if len(open_ones) == 1 else 's'} of out-of-tree PrivateUse1 backends "
            f"({', '.join(f'`{b}`' for b in backends)})"
        )
    elif all(r.disputed_by for r in reports):
        head = "## ootci: disputed — this PR is no longer a suspect of these out-of-tree breaks"
    else:
        head = "## ootci: resolved — the out-of-tree breaks this PR was suspected of are fixed"
    parts = [MARKER, head, ""]
    if page_url:
        parts += [f"Every backend's runs of this PR and the repro commands: [ootci PR #{pr}]({page_url})", ""]
    for report in sorted(reports, key=lambda r: (not r.accuses, r.backend, r.breakage_id)):
        if report.disputed_by:
            parts += [
                f"### disputed: `{report.backend}` — {report.title}",
                f"Not this PR, said {report.disputed_by}: {report.dispute_reason or ''}".rstrip(": "),
                "",
            ]
            continue
        status = "resolved" if report.resolved else "open"
        kind = f"{report.category}/{report.subtype}" if report.subtype else report.category
        title = f"[{report.title}]({report.url})" if report.url else report.title
        parts += [
            f"### {status}: `{report.backend}` — {kind}",
            f"{title}, seen {report.occurrences} time{'' if report.occurrences == 1 else 's'}; "
            f"torch {_range(report)}",
            "",
            report.verdict_line(),
            "",
            _fence(report.decisive_line),
            "",
            f"Why this PR (score {report.score:.2f}):",
            *[f"- {reason}" for reason in report.reasons],
            "",
        ]
    if quarantined:
        parts += [
            "### Quarantined as flaky, not counted",
            "These tests failed in the same runs but are quarantined as flaky: they open no "
            "breakage and are not why this PR is suspected.",
            "",
        ]
        for q in quarantined:
            where = f"[run {q.run_id}]({q.url})" if q.url else f"run {q.run_id}"
            what = (q.nodeid or q.line.strip())[:300].replace("`", "'")
            parts.append(f"- `{q.backend}` {where}: `{what}`")
        parts.append("")
    parts.append(
        "<sub>Posted by ootci, the nightly PrivateUse1 compatibility CI. It ranks the "
        "commits of the torch range by what the failure names; the score is its confidence, "
        "not a verdict. A suspect is confirmed only by rebuilding the backend on the red torch "
        "with this PR's changes to installed files undone. This comment is edited in place "
        "as nights go by.</sub>"
    )
    return "\n".join(parts)
