"""The conformance pages: the matrix (backend x mechanism, each backend's latest results)
and one mechanism's history across runs, with the failing tests of each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import HTMLResponse

from service.api.deps import SessionDep
from service.api.templates import render
from service.models import ConformanceResult
from service.queries import conformance as q

router = APIRouter()

# status -> (css class, glyph, word). Colour and word together: the word is what a
# colour-blind reader or a screen reader gets.
STATUSES: dict[str, tuple[str, str, str]] = {
    "works": ("v-pass", "✓", "works"),
    "partial": ("v-flake", "◐", "partial"),
    "fails": ("v-backend", "✗", "fails"),
    "skipped": ("v-skipped", "–", "skipped"),
}
Mechanism = Annotated[str, Path(pattern=r"^[a-z_<>]{1,32}$")]


def status_of(row: ConformanceResult) -> str:
    if row.failed and row.passed:
        return "partial"
    if row.failed:
        return "fails"
    return "works" if row.passed else "skipped"


@dataclass(frozen=True)
class MatrixCell:
    status: str
    row: ConformanceResult

    @property
    def css(self) -> str:
        return STATUSES[self.status][0]

    @property
    def glyph(self) -> str:
        return STATUSES[self.status][1]

    @property
    def word(self) -> str:
        return STATUSES[self.status][2]


def _mechanism_order(rows: list[q.BackendConformance]) -> list[str]:
    order: dict[str, None] = {}
    for backend in rows:
        for mechanism in backend.results:  # in the suite's order (rows are stored so)
            order.setdefault(mechanism, None)
    return list(order)


@router.get("/conformance", response_class=HTMLResponse, name="dash_conformance")
def conformance_page(request: Request, session: SessionDep) -> HTMLResponse:
    latest = q.latest_per_backend(session)
    mechanisms = _mechanism_order(latest)
    rows = [
        (b, {m: MatrixCell(status_of(r), r) for m, r in b.results.items()}) for b in latest
    ]
    levels = {m: r.level for b in latest for m, r in b.results.items()}
    return render(request, "conformance.html", {
        "page_title": "Conformance", "rows": rows, "mechanisms": mechanisms,
        "levels": levels, "statuses": STATUSES,
    })


@router.get("/conformance/{mechanism}", response_class=HTMLResponse,
            name="dash_conformance_mechanism")
def mechanism_page(
    request: Request,
    session: SessionDep,
    mechanism: Mechanism,
    backend: Annotated[str | None, Query(max_length=100, pattern=r"^[^\x00]*$")] = None,
) -> HTMLResponse:
    history = [h for h in q.mechanism_history(session, mechanism)
               if backend is None or h.backend == backend]
    points = [(h, MatrixCell(status_of(h.result), h.result)) for h in history]
    return render(request, "conformance_mechanism.html", {
        "page_title": f"Conformance: {mechanism}", "mechanism": mechanism,
        "backend": backend, "points": points,
    })
