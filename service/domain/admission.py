"""Which torch specs a remote caller (the API's token holder, a webhook) may ask for.

The CLI runs whatever its user types: that user has a shell on the worker. A caller over
HTTP gets only what the operator configured: the pins and the default spec exactly as
written, ``nightly`` (on the configured nightly index, the only one it can use), and
``pip:torch==X`` for an exact version on the configured pip or nightly index. ``path:`` runs a tree's
``torch/__init__.py`` on the worker, ``wheel:`` and a foreign index make the worker fetch
and install what the caller names: those stay CLI-only unless the operator allows them
(``OOTCI_API_ALLOW_ANY_TORCH_SPEC``).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import Requirement

from service.domain.torch_spec import SourceKind, TorchSpec


@dataclass(frozen=True)
class CallerPolicy:
    configured_specs: frozenset[str]  # the pins and the default spec, as the operator wrote them
    pip_index_url: str  # "" = the installer's default index
    nightly_index_url: str = ""  # an exact nightly is pinned as pip:torch==X@@<this index>
    allow_any: bool = False


def _exact_torch_pin(requirement: str) -> bool:
    """``torch==X`` and nothing else: no URL (``torch @ https://...`` installs any file),
    no extras, no markers, no ranges or wildcards (the resolver would pick for the caller)."""
    parsed = Requirement(requirement)
    specifiers = list(parsed.specifier)
    return (
        parsed.url is None
        and not parsed.extras
        and parsed.marker is None
        and len(specifiers) == 1
        and specifiers[0].operator == "=="
        and "*" not in specifiers[0].version
    )


def _configured_indexes(policy: CallerPolicy) -> set[str]:
    indexes = {policy.pip_index_url.rstrip("/")}
    if policy.nightly_index_url:
        indexes.add(policy.nightly_index_url.rstrip("/"))
    return indexes


def refusal(spec: TorchSpec, policy: CallerPolicy) -> str | None:
    """Why a remote caller may not run ``spec`` (a parsed spec), or None when it may."""
    if policy.allow_any or spec.text in policy.configured_specs:
        return None
    if spec.kind == SourceKind.NIGHTLY:
        return None
    if (
        spec.kind == SourceKind.PIP
        and _exact_torch_pin(spec.requirement)
        and spec.index_url in _configured_indexes(policy)
    ):
        return None
    configured = ", ".join(sorted(policy.configured_specs)) or "none"
    return (
        f"torch spec {spec.text!r} is not one a remote caller may ask for: the configured "
        f"specs ({configured}), 'nightly' and 'pip:torch==X' on the configured pip or nightly index are; "
        "path:, wheel:, other indexes and other requirements are CLI-only unless the operator "
        "sets OOTCI_API_ALLOW_ANY_TORCH_SPEC=true"
    )
