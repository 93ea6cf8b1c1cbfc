"""Commands on TorchBuild: record what a torch spec resolved to on the night it was provisioned.

Takes a session and never commits: the caller owns the unit of work.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.commands.upsert import insert_or_ignore
from service.domain.torch_spec import SourceKind
from service.models import TorchBuild


def record_torch_build(
    session: Session,
    *,
    spec: str,
    source_kind: SourceKind,
    version: str,
    git_version: str,
    env_key: str,
    python: str,
) -> TorchBuild:
    """The one row per (spec, version, git_version), pointed at the environment that has it
    now (an env rebuilt after a cache sweep gets the same row). Every backend of a night
    first-sights a new nightly at once: whoever inserts first wins, the others re-read."""
    insert_or_ignore(
        session,
        TorchBuild,
        {"spec": spec, "source_kind": source_kind, "version": version, "git_version": git_version},
        conflict_on=["spec", "version", "git_version"],
    )
    row = session.scalars(
        select(TorchBuild).where(
            TorchBuild.spec == spec,
            TorchBuild.version == version,
            TorchBuild.git_version == git_version,
        )
    ).one()
    row.env_key = env_key
    row.python = python
    session.flush()
    return row


def record_artifact(build: TorchBuild, url: str, sha256: str) -> None:
    """The wheel this build was installed from. A nightly's spec row is shared by the
    nights that resolved to the same version, and they all installed the same wheel; the
    latest answer wins for the rare index that re-published a version."""
    if url:
        build.artifact_url = url
        build.artifact_sha256 = sha256 or None
