"""The dashboard's Jinja2 environment: where the templates are, and the filters they share.

Autoescape is on for every template (Jinja2Templates enables it for .html): log lines,
test names and webhook payloads reach the page only as escaped text. Nothing here may
mark such text safe; only ``service.domain.charts`` output (built from escaped parts) is.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import Request
from fastapi.templating import Jinja2Templates
from jinja2 import pass_context
from markupsafe import Markup
from starlette.responses import HTMLResponse

from service.api.auth import session_identity

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
TEMPLATE_DIR = DASHBOARDS / "templates"
STATIC_DIR = DASHBOARDS / "static"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def when(value: dt.datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else "–"


def day(value: dt.datetime | None) -> str:
    return value.strftime("%Y-%m-%d") if value else "–"


def short_sha(value: str | None, n: int = 10) -> str:
    return value[:n] if value else "–"


def filesize(n: int | None) -> str:
    if n is None:
        return "–"
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def trusted_svg(svg: str) -> Markup:
    """Charts are built by service.domain.charts, which escapes every label it embeds."""
    return Markup(svg)


def _base(request: Request, route: str, **params: Any) -> str:
    """A route's URL without its last path parameter, once per request: Starlette's url_for
    walks the routing table on each call, and list pages link hundreds of runs."""
    cache: dict[str, str] | None = getattr(request.state, "dash_url_bases", None)
    if cache is None:
        cache = request.state.dash_url_bases = {}
    if route not in cache:
        cache[route] = str(request.url_for(route, **params))
    return cache[route]


@pass_context
def run_url(context: dict[str, Any], run_id: int) -> str:
    base = _base(context["request"], "dash_run", run_id=0)
    return f"{base.removesuffix('0')}{int(run_id)}"


@pass_context
def test_url(context: dict[str, Any], nodeid: str) -> str:
    """A test's history page. The nodeid goes in the query string, percent-encoded, because
    parametrised ids hold characters ('?', '#', '[', spaces) a path cannot carry verbatim."""
    return f"{_base(context['request'], 'dash_tests')}?nodeid={quote(nodeid, safe='')}"


templates = Jinja2Templates(directory=str(TEMPLATE_DIR))
templates.env.filters.update(
    duration=duration,
    when=when,
    day=day,
    short_sha=short_sha,
    filesize=filesize,
    trusted_svg=trusted_svg,
)
def signed_in(request: Request) -> Any:
    """The dashboard's logged-in identity (``service/api/auth.py``), or None; pages that
    render no request (errors outside the app) show the login link."""
    try:
        return session_identity(request)
    except AttributeError:  # an app without a session key (not made by create_app)
        return None


templates.env.globals.update(test_url=test_url, run_url=run_url, signed_in=signed_in)


def render(
    request: Request, name: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context, status_code=status_code)
