"""Paging a step log by lines, so a 10 MB build log is never one page. Pure."""

from __future__ import annotations

from dataclasses import dataclass

LINES_PER_PAGE = 500


@dataclass(frozen=True)
class LogPage:
    page: int
    pages: int
    first_line: int  # 1-based number of the first line on this page
    lines: list[str]
    total_lines: int


def page_of_line(line_no: int, per_page: int = LINES_PER_PAGE) -> int:
    return max(1, (line_no - 1) // per_page + 1)


def paginate(data: bytes, page: int, per_page: int = LINES_PER_PAGE) -> LogPage:
    """Lines of ``page`` (1-based, clamped to the last page). Undecodable bytes become U+FFFD:
    a log is evidence, so it is shown as it is rather than rejected."""
    text = data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    total = len(lines)
    pages = max(1, -(-total // per_page))
    page = min(max(1, page), pages)
    start = (page - 1) * per_page
    return LogPage(page, pages, start + 1, lines[start: start + per_page], total)
