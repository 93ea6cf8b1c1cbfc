"""Paging a step log by lines, so a 10 MB build log is never one page. Pure."""

from __future__ import annotations

from dataclasses import dataclass

LINES_PER_PAGE = 500
LAST_PAGE = 1 << 62  # paginate() clamps a page number past the end to the last page


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
    """Lines of ``page`` (1-based, clamped to the last page).

    Lines are split on b"\n" only, as the classifier counts them, so a Finding's line number
    lands on the same line here even when a log holds carriage returns (progress bars) or
    form feeds, which ``str.splitlines`` would treat as line ends. Only the page's lines are
    decoded; undecodable bytes become U+FFFD: a log is evidence, shown as it is."""
    lines = data.split(b"\n")
    if lines[-1] == b"":  # the newline that ends the last line does not start another
        lines.pop()
    total = len(lines)
    pages = max(1, -(-total // per_page))
    page = min(max(1, page), pages)
    start = (page - 1) * per_page
    text = [line.removesuffix(b"\r").decode("utf-8", errors="replace")
            for line in lines[start: start + per_page]]
    return LogPage(page, pages, start + 1, text, total)
