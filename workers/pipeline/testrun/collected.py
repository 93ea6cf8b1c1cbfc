"""What one collection tells the later pytest processes of a suite: the files to leave out.

pytest imports every test module it collects (the bundled backend's suite spends seconds of
each process on it). The first process of a suite, or of a part, says what it is going to run
(the plugin's ``collected`` line) and the runner records what ran. A restart after a crash,
or the rerun of failures, needs only the files that still hold a test to run: the others are
not collected again. Which tests run does not change (the ones recorded stay deselected, as
before); a test that needed another file's module imported first already breaks in a part of
a parallel step, which never imports the other parts' files.
"""

from __future__ import annotations

from collections.abc import Iterable


def file_of(nodeid: str) -> str | None:
    """The file part of a node id (relative to the suite's root, as pytest names it); None
    for ootci's own records (``<collection>``, ``<session exit>``, ...)."""
    head = nodeid.split("::", 1)[0]
    return None if not head or head.startswith("<") or head == "." else head


def files_to_skip(known: Iterable[str], wanted: Iterable[str]) -> list[str]:
    """The files of the ``known`` node ids (tests recorded or collected so far, a file whose
    collection failed) that hold none of ``wanted`` (the tests still to run), and are not a
    directory holding one of them (a package's collection error is named by its dir)."""
    keep = {f for n in wanted if (f := file_of(n)) is not None}
    skip: dict[str, None] = {}
    for nodeid in known:
        head = file_of(nodeid)
        if head is None or head in keep or any(k.startswith(head + "/") for k in keep):
            continue
        skip[head] = None
    return list(skip)
