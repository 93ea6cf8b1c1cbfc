"""Stable test identities: a test's node id must not depend on where its tree was checked
out, so its history, its fingerprint and its breakage survive edits, shas and homes.

Runs test a per-run copy of the backend under ``<cache>/sources/<name>/<key>/`` (``key``:
``nogit-<content hash>`` for a directory backend, the git tree's 24 hex digits for a git
one, plus ``-<8 hex>`` for local edits). When pytest picked a rootdir above that copy (a
backend without its own pytest config inside a checkout holding ``./.ootci``), node ids
came out as ``.ootci/cache/sources/<name>/nogit-<hash>/tests/test_x.py::test_y``: a new id
with every edit. The test step now pins ``--rootdir`` to the tree; ``stable_nodeid`` re-keys
what was stored before (the migration and ``ootci reclassify``).
"""

from __future__ import annotations

import re

# Records of the test step that name no test of the suite: pytest died while collecting
# or after the last test, or torch itself could not be imported (the runner's probe).
COLLECTION_NODEID = "<collection>"
SESSION_EXIT_NODEID = "<session exit>"
IMPORT_NODEID = "<import torch>"

_RUN_TREE_PREFIX = re.compile(
    r"^(?:[^:]*/)?sources/[^/:]+/(?:nogit-[0-9a-f]+|[0-9a-f]{24}(?:-[0-9a-f]{8})?)/"
)


def stable_nodeid(nodeid: str) -> str:
    """``nodeid`` without a run tree's location in front of the backend's own path."""
    return _RUN_TREE_PREFIX.sub("", nodeid, count=1)
