"""The home page: the compatibility matrix (torch targets x backends x stages)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Query, Request
from markupsafe import Markup, escape
from sqlalchemy.orm import Session
from starlette.responses import HTMLResponse

from service.api.deps import ContextDep, SessionDep
from service.api.pages.cells import EMPTY, VERDICTS, Cell, FailureFact, RunFacts, stage_cells
from service.api.templates import render
from service.domain.triage_actions import is_snoozed
from service.models import utcnow
from service.queries import runs as run_queries
from service.queries import stages
from service.queries.breakages import BreakageFilters, list_breakages
from service.queries.matrix import MatrixCell, matrix

router = APIRouter()

TARGETS_PER_PAGE = 30


@dataclass(frozen=True)
class Row:
    label: str
    kind: str  # nightly | pin | unresolved
    torch_build_id: int | None
    cells: dict[tuple[str, str], Cell]
    changed: bool


def _kind(cell: MatrixCell) -> str:
    if cell.torch_build_id is None:
        return "unresolved"
    return (
        "nightly" if cell.torch_spec == "nightly" or ".dev" in (cell.torch_version or "") else "pin"
    )


def _label(cell: MatrixCell) -> str:
    if cell.torch_version is None:
        return cell.torch_spec
    sha = (cell.torch_git_version or "")[:10]
    return f"{cell.torch_version} ({sha})" if sha else cell.torch_version


def _target(cell: MatrixCell) -> tuple[int | None, str | None]:
    return (cell.torch_build_id, None if cell.torch_build_id is not None else cell.torch_spec)


def window(cells: list[MatrixCell], offset: int, count: int) -> list[MatrixCell]:
    """The cells of targets ``offset`` .. ``offset + count`` (cells come target by target)."""
    order: dict[tuple[int | None, str | None], int] = {}
    for cell in cells:
        order.setdefault(_target(cell), len(order))
    return [c for c in cells if offset <= order[_target(c)] < offset + count]


def build_rows(
    cells: list[MatrixCell], facts: stages.StageFacts, suites: list[str], backends: list[str]
) -> tuple[list[Row], list[tuple[str, str]]]:
    """Group the run-level cells into rows and expand each run into its stage cells."""
    columns = [(b, stage) for b in backends for stage in ("build", "import", *suites)]
    grouped: dict[tuple[int | None, str | None], list[MatrixCell]] = {}
    for cell in cells:  # already newest target first
        grouped.setdefault(_target(cell), []).append(cell)
    rows: list[Row] = []
    for group in grouped.values():
        row_cells: dict[tuple[str, str], Cell] = {}
        for cell in group:
            run = RunFacts(
                run_id=cell.run_id,
                state=cell.state,
                verdict=cell.verdict,
                verdict_subtype=cell.verdict_subtype,
                steps=facts.steps.get(cell.run_id, {}),
                failures=[FailureFact(*f) for f in facts.failures.get(cell.run_id, [])],
                suite_counts=facts.suite_counts.get(cell.run_id, {}),
                suite_of=facts.suite_of.get(cell.run_id, {}),
            )
            for stage, value in stage_cells(run, suites).items():
                row_cells[(cell.backend, stage)] = value
        rows.append(
            Row(_label(group[0]), _kind(group[0]), group[0].torch_build_id, row_cells, changed=True)
        )
    return rows, columns


def mark_changes(rows: list[Row], columns: list[tuple[str, str]]) -> list[Row]:
    """A row changed when a cell's verdict differs from the next older row of the same kind
    (nightly against the previous nightly, pin against pin). A row with no older row to
    compare with counts as changed: there is nothing to say it is the same."""
    out: list[Row] = []
    for i, row in enumerate(rows):
        older = next((r for r in rows[i + 1 :] if r.kind == row.kind), None)
        changed = older is None or any(
            row.cells.get(c, EMPTY).verdict != older.cells.get(c, EMPTY).verdict for c in columns
        )
        out.append(Row(row.label, row.kind, row.torch_build_id, row.cells, changed))
    return out


def row_cells_html(row: Row, columns: list[tuple[str, str]], runs_base: str) -> Markup:
    """The <td>s of one row. Built here rather than in the template because a page holds
    over a thousand cells and a Jinja loop with a dozen escaped expressions per cell was
    the largest cost of the page; every value from the database still goes through
    ``escape`` (backend and suite names, the failure line in the hover text)."""
    out = []
    for backend, stage in columns:
        c = row.cells.get((backend, stage), EMPTY)
        b, st = escape(backend), escape(stage)
        first = " first" if stage == "build" else ""
        muted = " muted-cell" if c.muted else ""
        head = (f'<td class="cell v-{c.verdict}{first}{muted}" data-backend="{b}" '
                f'data-stage="{st}" data-verdict="{c.verdict}">')
        if c.run_id is None:
            out.append(f'{head}<span title="not run">·</span></td>')
        else:
            out.append(f'{head}<a href="{runs_base}{c.run_id}" title="{b} · {st}: '
                       f'{escape(c.title)}">{c.glyph}<span class="lbl">{c.label}</span></a></td>')
    return Markup("".join(out))


OPEN_SHOWN = 6


def open_breakages(session: Session, backend: str | None) -> dict[str, object]:
    """The few open breakages a vendor checks first: what broke, since which torch, and the
    most likely upstream change (open ones, most recently seen first)."""
    found = list_breakages(session, BreakageFilters(status="open", backend=backend),
                           limit=OPEN_SHOWN)
    first_seen = run_queries.target_labels(
        session, {b.first_seen_run_id for b in found.breakages if b.first_seen_run_id})
    now = utcnow()
    snoozed = {b.id for b in found.breakages
               if is_snoozed(b.snoozed_until, b.snoozed_until_torch, now)}
    return {"page": found, "first_seen": first_seen, "snoozed": snoozed}


@router.get("/", response_class=HTMLResponse, name="dash_matrix")
def matrix_page(
    request: Request,
    session: SessionDep,
    ctx: ContextDep,
    backend: Annotated[str | None, Query(max_length=100, pattern=r"^[^\x00]*$")] = None,
    changed: bool = False,
    page: Annotated[int, Query(ge=1, le=10_000)] = 1,
) -> HTMLResponse:
    if not run_queries.has_runs(session):
        return render(request, "empty.html", {"page_title": "No runs yet"})
    backend = backend or None
    offset = (page - 1) * TARGETS_PER_PAGE
    # One more target than shown, so the last row can still be compared with an older one.
    # The shared matrix() has no offset: drop the newer pages' targets before anything
    # heavier (stage facts, rendering) is done for them.
    cells = window(
        matrix(session, limit_targets=offset + TARGETS_PER_PAGE + 1, backend=backend),
        offset, TARGETS_PER_PAGE + 1)
    facts = stages.stage_facts(session, {c.run_id for c in cells})
    suites = facts.suites()
    backends = sorted({c.backend for c in cells})
    rows, columns = build_rows(cells, facts, suites, backends)
    rows = mark_changes(rows, columns)
    has_older = len(rows) > TARGETS_PER_PAGE
    rows = rows[:TARGETS_PER_PAGE]
    shown = [r for r in rows if r.changed] if changed else rows
    runs_base = str(request.url_for("dash_run", run_id=1)).removesuffix("1")
    return render(
        request,
        "matrix.html",
        {
            "page_title": "Compatibility matrix",
            "rows": [(r, row_cells_html(r, columns, runs_base)) for r in shown],
            "hidden": len(rows) - len(shown),
            "columns": columns,
            "backends": backends,
            "suites": suites,
            "all_backends": run_queries.backend_list(session),
            "backend": backend,
            "changed": changed,
            "page": page,
            "has_older": has_older,
            "active": run_queries.active_runs(session),
            "open_breakages": open_breakages(session, backend),
            "github_repo": ctx.settings.upstream_repo,
            "verdicts": VERDICTS,
            "empty_cell": EMPTY,
        },
    )
