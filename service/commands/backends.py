"""Registering a backend: a name, once taken by a source, stays with that source.

What the API, webhooks and the nightly schedule run is looked up by a backend's name, so
re-pointing a name at another tree changes what every later trigger executes. That takes
an explicit ``re_register`` (``ootci run --re-register``), and every registration and
re-registration is recorded with who did it and when (``BackendChange``).

The registry (``ootci backend add|remove``, ``POST /api/backends``) registers a backend on
purpose, from a directory or a git URL at a ref: those backends are the nightly's and a
push to their repository rebuilds them. A backend that only appeared through an ``ootci run
--backend DIR`` experiment is recorded the same way but never scheduled.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.upsert import insert_or_ignore
from service.models import Backend, BackendChange, Run


class BackendNameTaken(ValueError):
    """A recipe names a backend that another source already registered."""


def register_backend(
    session: Session, name: str, source: str, *, changed_by: str, re_register: bool = False
) -> Backend:
    """The backend ``name`` from ``source``: created (and recorded) when new, as it is when
    ``source`` is already its source, re-pointed (and recorded) only with ``re_register``."""
    # Insert-or-ignore then read: of concurrent first registrations of one name (eight
    # `ootci run`s started together) one inserts and records, the others find its row.
    added = insert_or_ignore(
        session, Backend, {"name": name, "source": source, "recipe": {}}, conflict_on=["name"]
    )
    backend = session.scalars(select(Backend).where(Backend.name == name)).one()
    if added is not None:
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


def add_backend(
    session: Session,
    name: str,
    source: str,
    *,
    changed_by: str,
    ref: str | None = None,
    subdir: str | None = None,
    re_register: bool = False,
) -> Backend:
    """Register ``name`` for the nightly and push rebuilds. The caller has checked that the
    source exists (``service.sources.check_source``: a URL that answers, a dir with a recipe).
    A name already taken by an experiment from the same source is promoted; by another
    source, it is refused unless ``re_register``."""
    existing = session.scalar(select(Backend).where(Backend.name == name))
    if (
        existing is not None and existing.nightly and existing.source == source
        and (existing.ref, existing.subdir) != (ref, subdir or None) and not re_register
    ):
        raise BackendNameTaken(
            f"backend {name!r} is registered from {source} at {existing.ref or 'its default branch'}"
            f"{' in ' + existing.subdir if existing.subdir else ''}: pass --re-register to change it"
        )
    promoted = existing is not None and not existing.nightly
    backend = register_backend(session, name, source, changed_by=changed_by,
                               re_register=re_register)
    backend.ref, backend.subdir, backend.nightly = ref, subdir or None, True
    if promoted:
        _record(session, backend, changed_by, "registered", None)
    return backend


def remove_backend(session: Session, name: str, *, changed_by: str) -> bool:
    """Take ``name`` off the nightly and push rebuilds; False when no such backend is
    registered. A backend with runs keeps its row (their history names it); one without
    is deleted."""
    backend = session.scalar(select(Backend).where(Backend.name == name))
    if backend is None or not backend.nightly:
        return False
    has_runs = session.scalar(select(Run.id).where(Run.backend_id == backend.id).limit(1))
    if has_runs is None:
        session.delete(backend)
        return True
    backend.nightly = False
    _record(session, backend, changed_by, "removed", backend.source)
    return True


def _record(
    session: Session, backend: Backend, changed_by: str, change: str, before: str | None
) -> None:
    session.add(BackendChange(backend_id=backend.id, changed_by=changed_by[:200], change=change,
                              source_before=before, source_after=backend.source))
