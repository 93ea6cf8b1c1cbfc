"""The preload of test_codegen.py's generator runs (``_preloaded.run_preloaded``).

tools/gen_registration.py parses the installed torch's native_functions.yaml with
torchgen (its ``parse_torch_yaml``), about two thirds of a run's CPU; torchgen caches the
result per path in the process. This calls that function once in the fork server: each
run is then the generator's own `__main__` in a fork that finds the parse cached, and
everything after it (filtering, grouping, the parse of the source YAML, generating and
writing) is the run's own, as in a fresh interpreter.
"""

from __future__ import annotations

import runpy
from pathlib import Path

GENERATOR = Path(__file__).resolve().parent.parent / "tools" / "gen_registration.py"

_generator = runpy.run_path(str(GENERATOR))
_generator["parse_torch_yaml"](_generator["packaged_aten_dir"]())
