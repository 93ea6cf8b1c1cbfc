"""Masking secret values in stored logs.

Builds and tests never receive ootci's secrets (``child_env``), so a secret in a log means
a leak we did not foresee: a worker path that prints a URL, a tool that echoes its proxy
with credentials. This is the second line: every line is masked before it is written.
The masker itself is ``service.domain.redaction``'s, the same one every stored column
passes (``service.secrets``).
"""

from __future__ import annotations

import os

from service import secrets
from service.config import Settings
from service.domain.redaction import MASK, SecretMasker, secrets_in_environ, url_password

__all__ = ["MASK", "SecretMasker", "masker_for_settings", "process_masker", "secrets_in_environ",
           "settings_secrets", "url_password"]


def process_masker() -> SecretMasker:
    """Every secret this process holds: in its environment and read at start."""
    return SecretMasker([*secrets_in_environ(os.environ), *secrets.known()])


def masker_for_settings(settings: Settings) -> SecretMasker:
    """What a worker masks: the secrets in its environment, in its settings, and every
    secret the process read at start (``service.secrets``: the environment is scrubbed
    by then). The settings' secrets join the storage mask too."""
    secrets.remember(*settings.secret_values())
    secrets.remember_environ(os.environ)
    return process_masker()


def settings_secrets(settings: Settings) -> list[str]:
    """ootci's own secrets as the worker loaded them (an ``.env`` file is not in the
    environment, so these are not found by :func:`secrets_in_environ`)."""
    return settings.secret_values()
