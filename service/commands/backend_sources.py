"""Moved to ``service/sources.py``: checking a source is an I/O probe, not a write.

Only ``workers/pipeline/source_tree.py`` still imports from here; when that import names
``service.sources``, delete this module.
"""

from __future__ import annotations

from service.sources import git_environ, is_git_url

__all__ = ["git_environ", "is_git_url"]
