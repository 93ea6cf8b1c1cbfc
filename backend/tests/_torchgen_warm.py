"""The preload of test_codegen.py's generator runs (``_preloaded.run_preloaded``).

tools/gen_registration.py parses the installed torch's native_functions.yaml with
torchgen's ``parse_native_yaml``, about two thirds of a run's CPU; torchgen caches the
result per path in the process. This does the same parse, with the same arguments, once
in the fork server: each run is then the generator's own `__main__` in a fork that finds
the parse cached, and everything after it (filtering, grouping, the parse of the source
YAML, generating and writing) is the run's own, as in a fresh interpreter.
"""

from __future__ import annotations

import runpy
from pathlib import Path

from torchgen.gen import parse_native_yaml

GENERATOR = Path(__file__).resolve().parent.parent / "tools" / "gen_registration.py"

_aten = runpy.run_path(str(GENERATOR))["packaged_aten_dir"]()
# The arguments gen_registration.generate() passes (the cache is keyed by the path).
parse_native_yaml(str(_aten / "native" / "native_functions.yaml"),
                  str(_aten / "native" / "tags.yaml"))
