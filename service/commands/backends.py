"""Registering a backend: a name, once taken by a source, stays with that source.

What the API, webhooks and the nightly schedule run is looked up by a backend's name, so
re-pointing a name at another tree changes what every later trigger executes. That takes
an explicit ``re_register`` (``ootci run --re-register``), and every registration and
re-registration is recorded with who did it and when (``BackendChange``).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.models import Backend, BackendChange


class BackendNameTaken(ValueError):
    """A recipe names a backend that another source already registered."""


def register_backend(
    session: Session, name: str, source: str, *, changed_by: str, re_register: bool = False
) -> Backend:
    """The backend ``name`` from ``source``: created (and recorded) when new, as it is when
    ``source`` is already its source, re-pointed (and recorded) only with ``re_register``."""
    backend = session.scalar(select(Backend).where(Backend.name == name))
    if backend is None:
        backend = Backend(name=name, source=source, recipe={})
        session.add(backend)
        session.flush()
        _record(session, backend, changed_by, "registered", None)
        return backend
    if backend.source == source:
        return backend
    if not re_register:
        raise BackendNameTaken(
            f"backend {name!r} is registered from {backend.source}, not {source}: "
            "running this tree would change what every later API, webhook and nightly run "
            f"of {name!r} executes. Give the recipe another name, or pass --re-register "
            "to point the name at this tree"
        )
    before = backend.source
    backend.source = source
    _record(session, backend, changed_by, "re-registered", before)
    return backend


def _record(
    session: Session, backend: Backend, changed_by: str, change: str, before: str | None
) -> None:
    session.add(BackendChange(backend_id=backend.id, changed_by=changed_by[:200], change=change,
                              source_before=before, source_after=backend.source))
