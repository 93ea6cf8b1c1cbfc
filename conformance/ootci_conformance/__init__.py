"""The PrivateUse1 conformance suite: mechanisms, how optional each is, and the plugin
(``ootci_conformance.plugin``) that runs the suite against ``--device-type NAME``."""

from __future__ import annotations

REQUIRED = "required"
RECOMMENDED = "recommended"
OPTIONAL = "optional"
LEVELS = (REQUIRED, RECOMMENDED, OPTIONAL)

# mechanism -> its level. Each has one file in suite/: test_<mechanism>.py.
MECHANISMS: dict[str, str] = {
    "device": REQUIRED,
    "guard": REQUIRED,
    "streams": RECOMMENDED,
    "events": RECOMMENDED,
    "allocator": REQUIRED,
    "host_allocator": RECOMMENDED,
    "generator": RECOMMENDED,
    "ops": REQUIRED,
    "fallback": RECOMMENDED,
    "stub": RECOMMENDED,
    "custom_ops": OPTIONAL,
    "autograd": REQUIRED,
    "autocast": OPTIONAL,
    "serialization": REQUIRED,
    "autoload": RECOMMENDED,
    "accelerator": REQUIRED,
    "fork_safety": RECOMMENDED,
    "compile": OPTIONAL,
    "distributed": OPTIONAL,
}


def mechanism_of_path(path: str) -> str | None:
    """The mechanism a suite file tests: ``.../test_streams.py`` -> ``streams``."""
    stem = path.rsplit("/", 1)[-1].split("::", 1)[0].removesuffix(".py")
    name = stem.removeprefix("test_")
    return name if stem != name and name in MECHANISMS else None
