"""Paging a step log by lines, so a 10 MB build log is never one page. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

LINES_PER_PAGE = 500
LAST_PAGE = 1 << 62  # paginate() clamps a page number past the end to the last page
# A line longer than this is shown cut, with how much was left out: one line with no
# newline in a 200 MB log must not become one 200 MB page.
MAX_LINE_BYTES = 64 * 1024


@dataclass(frozen=True)
class LogPage:
    page: int
    pages: int
    first_line: int  # 1-based number of the first line on this page
    lines: list[str]
    total_lines: int
    size: int = 0  # bytes of the log read
    partial: bool = False  # the log's last line has no newline yet


def page_of_line(line_no: int, per_page: int = LINES_PER_PAGE) -> int:
    """The page line ``line_no`` is on; of a log's line count, its last page."""
    return max(1, (line_no - 1) // per_page + 1)


def paginate(data: bytes, page: int, per_page: int = LINES_PER_PAGE) -> LogPage:
    """Lines of ``page`` (1-based, clamped to the last page) of a log in hand."""
    return paginate_pieces([data], page, per_page)


class _Line:
    """One line as it arrives in pieces: at most MAX_LINE_BYTES kept, the rest counted."""

    __slots__ = ("kept", "dropped")

    def __init__(self) -> None:
        self.kept = bytearray()
        self.dropped = 0

    def add(self, data: bytes | memoryview) -> None:
        room = MAX_LINE_BYTES - len(self.kept)
        self.kept += data[:room]
        self.dropped += max(0, len(data) - room)

    def text(self) -> str:
        text = bytes(self.kept).removesuffix(b"\r").decode("utf-8", errors="replace")
        return text + (f" [... {self.dropped} more bytes of this line]" if self.dropped else "")


def paginate_pieces(pieces: Iterable[bytes], page: int, per_page: int = LINES_PER_PAGE) -> LogPage:
    """Lines of ``page`` (1-based, clamped to the last page) of a log read piece by piece,
    holding at most two pages of lines: pages are fixed blocks of ``per_page`` lines, so
    the page asked for is kept when it passes, and the block being filled is the last
    page should the one asked for never come.

    Lines are split on b"\n" only, as the classifier counts them, so a Finding's line number
    lands on the same line here even when a log holds carriage returns (progress bars) or
    form feeds, which ``str.splitlines`` would treat as line ends. Only the page's lines are
    decoded; undecodable bytes become U+FFFD: a log is evidence, shown as it is."""
    page = max(1, page)
    kept: list[_Line] = []  # the lines of block ``page``
    current: list[_Line] = []  # the lines of the block the last line is in
    line: _Line | None = None
    total = 0  # lines started so far
    size = 0
    last = b""
    for data in pieces:
        if not data:
            continue
        size += len(data)
        last = data[-1:]
        view = memoryview(data)
        at = 0
        while at < len(data):
            if line is None:
                block = total // per_page + 1
                if total % per_page == 0:
                    current = kept if block == page else []
                total += 1
                line = _Line()
                current.append(line)
            newline = data.find(b"\n", at)
            stop = len(data) if newline < 0 else newline
            line.add(view[at:stop])
            if newline < 0:
                break
            at, line = newline + 1, None
    pages = page_of_line(total, per_page)
    shown = kept if page <= pages else current
    page = min(page, pages)
    return LogPage(page, pages, (page - 1) * per_page + 1, [x.text() for x in shown], total,
                   size, bool(size) and last != b"\n")


def page_from(pieces: Iterable[bytes], skip: int, page: int, total_lines: int, size: int,
              per_page: int = LINES_PER_PAGE) -> LogPage:
    """Page ``page`` of a log of ``total_lines`` lines and ``size`` bytes, read from
    ``pieces`` that start ``skip`` newlines before the page's first line
    (``api/logs.read_page``: the nearest seek point before it): the same page ``paginate``
    gives of the whole log, and nothing after the page is read. Holds one page of lines."""
    pages = page_of_line(total_lines, per_page)
    page = min(max(1, page), pages)
    lines: list[_Line] = []
    line: _Line | None = None
    last = b""
    for data in pieces:
        if not data:
            continue
        last = data[-1:]
        at = 0
        while skip and at < len(data):
            newline = data.find(b"\n", at)
            if newline < 0:
                at = len(data)
                break
            at, skip = newline + 1, skip - 1
        view = memoryview(data)
        while at < len(data):
            if line is None:
                if len(lines) == per_page:
                    return _page(page, pages, per_page, lines, total_lines, size, partial=False)
                line = _Line()
                lines.append(line)
            newline = data.find(b"\n", at)
            stop = len(data) if newline < 0 else newline
            line.add(view[at:stop])
            if newline < 0:
                break
            at, line = newline + 1, None
    return _page(page, pages, per_page, lines, total_lines, size,
                 partial=bool(lines) and last != b"\n")


def _page(page: int, pages: int, per_page: int, lines: list[_Line], total: int, size: int, *,
          partial: bool) -> LogPage:
    return LogPage(page, pages, (page - 1) * per_page + 1, [x.text() for x in lines], total,
                   size, partial)


def last_page(data: bytes, total_lines: int, size: int,
              per_page: int = LINES_PER_PAGE) -> LogPage:
    """The last page of a log of ``total_lines`` lines and ``size`` bytes from ``data``,
    its last page's lines (``api/logs.read_last_page``): the same page ``paginate`` gives
    of the whole log, without the rest of it."""
    pages = page_of_line(total_lines, per_page)
    lines = paginate_pieces([data], 1, per_page).lines
    return LogPage(pages, pages, (pages - 1) * per_page + 1, lines, total_lines, size,
                   bool(data) and not data.endswith(b"\n"))
