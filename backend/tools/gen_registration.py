"""Generate torch_openreg's aten registration with the installed torch's torchgen.

    python tools/gen_registration.py --source-yaml csrc/aten/native_functions.yaml \
        --output-dir <build>/generated

CMake runs this at build time (backend/CMakeLists.txt). It writes, into the
output directory:
  PrivateUse1NativeFunctions.h  the kernel declarations (struct
                                openreg::native::OpenRegNativeFunctions);
  RegisterPrivateUse1.cpp       TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) with
                                one m.impl per supported op;
  native_functions.yaml         the source YAML as given to torchgen (filtered).

Generation follows the torch of the running interpreter: torchgen and the
native_functions.yaml it parses come from that wheel. An op listed in the
source YAML that this torch does not have is left out with a warning instead
of failing the build (torchgen itself would abort on it). Its kernel must then
be guarded, see docs/codegen.md.

Only files whose content changed are rewritten (torchgen's FileManager does
the same), so the compile steps after a regeneration stay no-ops.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import tempfile
from pathlib import Path

import yaml


def packaged_aten_dir() -> Path:
    import torchgen

    return Path(torchgen.__file__).resolve().parent / "packaged" / "ATen"


def filter_source(source: dict, known: set[str]) -> tuple[dict, list[str]]:
    """The source YAML without the ops this torch lacks, and the names dropped."""
    missing = [op for op in source.get("supported") or [] if op not in known]
    filtered = dict(source)
    filtered["supported"] = [op for op in source.get("supported") or [] if op in known]
    if "symint" in source:
        filtered["symint"] = [op for op in source.get("symint") or [] if op in known]
    return filtered, missing


REGISTRATION = "RegisterPrivateUse1.cpp"

# torchgen registers each wrapper with TORCH_FN(wrapper): a compile-time
# function pointer, so c10 instantiates the boxing code (IValue stack to
# arguments and back) and the unboxed thunk once per op, ~150 times. Passed as
# a plain function pointer (`m.impl(name, &wrapper)`, torch::CppFunction's
# other constructor) the kernel functor holds the pointer at run time, and
# those templates are instantiated once per C++ signature (62 for ~150 ops),
# which took ~4 CPU-s off the glue's compile (docs/build.md).
# The kernel is still registered unboxed and boxed, with the same CppSignature
# and inferred schema: an unboxed call (at::add from C++, torch.add from
# Python) stays unboxed and pays one indirect call more (docs/build.md,
# benchmarks/backend_ops.py).
_TORCH_FN_WRAPPER = re.compile(r"TORCH_FN\((wrapper_\w+)\)")


def register_by_pointer(registration: str) -> str:
    """The generated registration with `TORCH_FN(wrapper_X)` as `&wrapper_X`."""
    return _TORCH_FN_WRAPPER.sub(r"&\1", registration)


def write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def parse_torch_yaml(aten_dir: Path):
    """torch's native_functions.yaml, parsed by torchgen (which keeps it per path in the
    process: tests/_torchgen_warm.py parses it once for the suite's generator runs)."""
    from torchgen.gen import parse_native_yaml

    return parse_native_yaml(str(aten_dir / "native" / "native_functions.yaml"),
                             str(aten_dir / "native" / "tags.yaml"))


def generate(source_yaml: Path, output_dir: Path) -> list[str]:
    from torchgen import gen_backend_stubs as stubs
    from torchgen.gen import get_grouped_native_functions
    from torchgen.selective_build.selector import SelectiveBuilder
    from torchgen.utils import FileManager

    aten_dir = packaged_aten_dir()
    output_dir.mkdir(parents=True, exist_ok=True)
    source = yaml.safe_load(source_yaml.read_text())
    parsed = parse_torch_yaml(aten_dir)
    known = {str(f.func.name) for f in parsed.native_functions}
    filtered, missing = filter_source(source, known)
    filtered_yaml = output_dir / "native_functions.yaml"
    write_if_changed(filtered_yaml, yaml.safe_dump(filtered, sort_keys=False))

    # gen_backend_stubs.run() minus two things: it would include ATen/Functions.h
    # (every operator's header, ~10 CPU-s per compile) instead of per-operator
    # headers, and it would re-parse native_functions.yaml we already hold.
    grouped = get_grouped_native_functions(parsed.native_functions)
    backend = stubs.parse_backend_yaml(str(filtered_yaml), grouped, parsed.backend_indices)
    fm = FileManager(install_dir=str(output_dir), template_dir=str(aten_dir / "templates"), dry_run=False)
    stubs.gen_dispatchkey_nativefunc_headers(
        fm, backend.class_name, backend.cpp_namespace, backend.backend_indices, grouped,
        backend.backend_key, backend.autograd_key,
    )
    registration_options = {}
    if "per_operator_headers" in inspect.signature(stubs.gen_dispatcher_registrations).parameters:
        registration_options["per_operator_headers"] = True
    # The registration is written to a scratch directory first and rewritten
    # (register_by_pointer) into output_dir, only if that changes its content.
    with tempfile.TemporaryDirectory() as scratch:
        stubs.gen_dispatcher_registrations(
            FileManager(install_dir=scratch, template_dir=str(aten_dir / "templates"), dry_run=False),
            str(output_dir), backend.class_name, backend.backend_indices, grouped,
            backend.backend_key, backend.backend_key, SelectiveBuilder.get_nop_selector(),
            **registration_options,
        )
        for generated in Path(scratch).iterdir():
            text = generated.read_text()
            if generated.name == REGISTRATION:
                text = register_by_pointer(text)
            write_if_changed(output_dir / generated.name, text)
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-yaml", type=Path, required=True)
    parser.add_argument("--output-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    for op in generate(args.source_yaml, args.output_dir):
        print(f"torch_openreg: this torch has no aten::{op}; not registered", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
