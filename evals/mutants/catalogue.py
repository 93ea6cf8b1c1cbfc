"""The mutant catalogue: realistic upstream breakages of the PrivateUse1 path, as patches.

Each mutant changes the installed torch the way an upstream PR changed (or could change) it,
and targets code the bundled backend really uses (backend/csrc, backend/torch_openreg), so
the build or the contract suite really breaks. Anchors are exact torch 2.13 text: a release
that moved them makes the mutant refuse to apply instead of silently breaking nothing.

PR numbers are real pytorch/pytorch PRs of the change imitated (several are applied in
reverse: the backend is already on the new API, so the mutant plays the change against it);
``pr=None`` where the kind of change is real but no single PR is the model.
"""

from __future__ import annotations

from evals.mutants.edits import InsertAfter, MoveHeader, MutantError, Replace
from evals.mutants.mutant import Expected, Mutant
from service.domain.verdict import Category, Stage, Subtype

_UP = Category.UPSTREAM

ALLOCATOR_H = "include/c10/core/Allocator.h"
DEVICE_ALLOCATOR_H = "include/c10/core/CachingDeviceAllocator.h"
HOST_ALLOCATOR_H = "include/ATen/core/CachingHostAllocator.h"
PU1_HOOKS_H = "include/ATen/detail/PrivateUse1HooksInterface.h"
EMPTY_TENSOR_H = "include/ATen/EmptyTensor.h"

# Every hooks interface that overrides hasPrimaryContext: an upstream signature change
# touches them all, so the only file left behind is the backend's override.
_HOOKS_OVERRIDING_HAS_PRIMARY_CONTEXT = (
    "CUDA", "HIP", "IPU", "MAIA", "MPS", "MTIA", "PrivateUse1", "XLA", "XPU",
)

_RESET_PEAK = "  virtual void resetPeakStats(c10::DeviceIndex device) = 0;\n"

_REGISTER_HOST_ALLOCATOR = """\
#define REGISTER_HOST_ALLOCATOR(device_type, allocator) \\
  namespace {                                           \\
  static at::HostAllocatorRegistry<device_type>         \\
      g_host_allocator_registry_instance(allocator);    \\
  }
"""

_IS_BAREBONES_UNSIGNED = """\
inline bool isBarebonesUnsignedType(ScalarType t) {
  return t == ScalarType::UInt1 || t == ScalarType::UInt2 ||
      t == ScalarType::UInt3 || t == ScalarType::UInt4 ||
      t == ScalarType::UInt5 || t == ScalarType::UInt6 ||
      t == ScalarType::UInt7 || t == ScalarType::UInt16 ||
      t == ScalarType::UInt32 || t == ScalarType::UInt64;
}

"""

_HOST_REGISTRY = """\
template <DeviceType device_type>
struct HostAllocatorRegistry {
  explicit HostAllocatorRegistry(HostAllocator* allocator) {
    at::setHostAllocator(device_type, allocator);
  }
};
"""

_EMPTY_GENERIC_DECL = """\
TORCH_API TensorBase empty_generic(
    IntArrayRef size,
    c10::Allocator* allocator,
    c10::DispatchKeySet ks,
    ScalarType scalar_type,
    std::optional<c10::MemoryFormat> memory_format_opt);

"""

_EMPTY_GENERIC_SYMINT_DECL = """\
TORCH_API TensorBase empty_generic_symint(
    SymIntArrayRef size,
    c10::Allocator* allocator,
    c10::DispatchKeySet ks,
    ScalarType scalar_type,
    std::optional<c10::MemoryFormat> memory_format_opt);
"""

_SEED_ALL = """\
            if not getattr(custom_device_mod, _bad_fork_name)():
                getattr(custom_device_mod, _seed_all_name)(seed)
"""

_CURRENT_DEVICE_DEFAULT = """\
    if device is None:
        return _get_current_device_index()
"""

# The tensor property only (the storage property has the same return line).
_IS_BACKEND_TAIL = """\
            return handle_torch_function(wrap_tensor_backend.__get__, (self,), self)  # type: ignore[attr-defined]
        return self.device.type == custom_backend_name
"""

MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        name="allocate-const",
        imitates="c10::Allocator::allocate changes const-ness (RFC-0030 row 1; applied in "
        "reverse: the backend already overrides the non-const allocate)",
        pr=120969,
        expect=Expected(Stage.BUILD, _UP, Subtype.SIGNATURE_CHANGED, {"symbol": r"^allocate$"}),
        edits=(
            Replace(ALLOCATOR_H, "  virtual DataPtr allocate(size_t n) = 0;\n",
                    "  virtual DataPtr allocate(size_t n) const = 0;\n"),
        ),
    ),
    Mutant(
        name="allocator-deviceindex-int",
        imitates="a DeviceAllocator virtual the backend overrides changes its device parameter "
        "between int and c10::DeviceIndex (RFC-0030 row 2; reverse of the DeviceIndex series)",
        pr=119545,
        expect=Expected(Stage.BUILD, _UP, Subtype.SIGNATURE_CHANGED,
                        {"symbol": r"^resetPeakStats$", "class": r"OpenRegDeviceAllocator$"}),
        edits=(Replace(DEVICE_ALLOCATOR_H, _RESET_PEAK,
                       "  virtual void resetPeakStats(int device) = 0;\n"),),
    ),
    Mutant(
        name="hooks-deviceindex-int",
        imitates="hasPrimaryContext, a PrivateUse1 hook the backend overrides, takes int "
        "instead of c10::DeviceIndex in every hooks interface (the hooks part of the series)",
        pr=119142,
        expect=Expected(Stage.BUILD, _UP, Subtype.SIGNATURE_CHANGED,
                        {"symbol": r"^hasPrimaryContext$"}),
        edits=(
            Replace("include/ATen/detail/AcceleratorHooksInterface.h",
                    "hasPrimaryContext(DeviceIndex device_index) const = 0;",
                    "hasPrimaryContext(int device_index) const = 0;"),
            Replace("include/ATen/detail/HPUHooksInterface.h",
                    "[[maybe_unused]] DeviceIndex device_index) const override {",
                    "[[maybe_unused]] int device_index) const override {"),
            *(
                Replace(f"include/ATen/detail/{kind}HooksInterface.h",
                        "hasPrimaryContext(DeviceIndex", "hasPrimaryContext(int")
                for kind in _HOOKS_OVERRIDING_HAS_PRIMARY_CONTEXT
            ),
        ),
    ),
    Mutant(
        name="host-allocator-header-moved",
        imitates="a header the backend includes moves to a new directory and the old path "
        "is dropped (torch's own includes are updated, the backend's are not)",
        pr=None,
        expect=Expected(Stage.BUILD, _UP, Subtype.HEADER_MOVED,
                        {"header": r"^ATen/core/CachingHostAllocator\.h$"}),
        edits=(MoveHeader("ATen/core/CachingHostAllocator.h",
                          "ATen/core/alloc/CachingHostAllocator.h"),),
    ),
    Mutant(
        name="register-hooks-renamed",
        imitates="a registration function is renamed (RegisterPrivateUse1HooksInterface -> "
        "registerPrivateUse1HooksInterface), no alias kept",
        pr=None,
        expect=Expected(Stage.BUILD, _UP, Subtype.SYMBOL_RENAMED,
                        {"symbol": r"^RegisterPrivateUse1HooksInterface$",
                         "suggestion": r"registerPrivateUse1HooksInterface$"}),
        edits=(Replace(PU1_HOOKS_H, "TORCH_API void RegisterPrivateUse1HooksInterface(",
                       "TORCH_API void registerPrivateUse1HooksInterface("),),
    ),
    Mutant(
        name="scalar-type-helper-removed",
        imitates="a c10 helper the backend calls is removed without replacement "
        "(c10::isBarebonesUnsignedType)",
        pr=None,
        expect=Expected(Stage.BUILD, _UP, Subtype.SYMBOL_REMOVED,
                        {"symbol": r"^isBarebonesUnsignedType$"}),
        edits=(Replace("include/c10/core/ScalarType.h", _IS_BAREBONES_UNSIGNED, ""),),
    ),
    Mutant(
        name="host-allocator-macro-removed",
        imitates="a registration macro the backend uses at namespace scope is removed "
        "(REGISTER_HOST_ALLOCATOR)",
        pr=None,
        expect=Expected(Stage.BUILD, _UP, Subtype.SYMBOL_REMOVED,
                        {"symbol": r"^REGISTER_HOST_ALLOCATOR$"}),
        edits=(Replace(HOST_ALLOCATOR_H, _REGISTER_HOST_ALLOCATOR, ""),),
    ),
    Mutant(
        name="device-allocator-new-pure-virtual",
        imitates="a new pure virtual in an interface the backend implements, as "
        "Allocator::copy_data was (RFC-0030 row 5): DeviceAllocator::setMemoryFraction",
        pr=100820,
        expect=Expected(Stage.BUILD, _UP, Subtype.NEW_PURE_VIRTUAL,
                        {"class": r"OpenRegDeviceAllocator$", "symbol": r"setMemoryFraction$"}),
        edits=(
            InsertAfter(DEVICE_ALLOCATOR_H, _RESET_PEAK,
                        "\n  // Caps what this process may allocate, as a fraction of the "
                        "device's memory.\n"
                        "  virtual void setMemoryFraction(double fraction, "
                        "c10::DeviceIndex device) = 0;\n"),
        ),
    ),
    Mutant(
        name="cxx23-required",
        imitates="the C++ standard torch headers require is bumped past the backend's "
        "(as C++17 -> C++20 was); here C++23 against the backend's C++20",
        pr=167929,
        expect=Expected(Stage.BUILD, _UP, Subtype.LANGUAGE_STANDARD,
                        {"standard": r"^C\+\+ ?23$"}),
        edits=(
            InsertAfter("include/c10/macros/Macros.h",
                        "#include <torch/headeronly/macros/Macros.h>\n",
                        "\n#if __cplusplus < 202302L\n"
                        "#error C++23 or later compatible compiler is required to use PyTorch.\n"
                        "#endif\n"),
        ),
    ),
    Mutant(
        name="host-allocator-undefined-symbol",
        imitates="an inline registration helper in a header starts calling a new exported "
        "function the installed libtorch does not have (headers newer than the libraries): "
        "the backend links, then fails to load with an undefined symbol",
        pr=None,
        expect=Expected(Stage.IMPORT, _UP, Subtype.LINK_ABI,
                        {"symbol": r"registerHostAllocatorStats"}),
        edits=(
            Replace(HOST_ALLOCATOR_H, _HOST_REGISTRY,
                    "// Keeps the host allocator statistics registry in sync (libtorch_cpu).\n"
                    "TORCH_API void registerHostAllocatorStats(\n"
                    "    at::DeviceType device_type,\n"
                    "    at::HostAllocator* allocator);\n\n"
                    + _HOST_REGISTRY.replace(
                        "    at::setHostAllocator(device_type, allocator);\n",
                        "    at::setHostAllocator(device_type, allocator);\n"
                        "    registerHostAllocatorStats(device_type, allocator);\n")),
        ),
    ),
    Mutant(
        name="float64-dtype-check",
        imitates="a new dtype check in a factory path the backend uses: empty_generic "
        "rejects float64 (as MPS does), RFC-0030's new dtype assert",
        pr=None,
        expect=Expected(Stage.TEST, _UP, Subtype.NEW_DTYPE_CHECK, {"test": r"\.py::test_"}),
        edits=(
            Replace(EMPTY_TENSOR_H, _EMPTY_GENERIC_DECL, ""),
            InsertAfter(EMPTY_TENSOR_H, _EMPTY_GENERIC_SYMINT_DECL,
                        # Always inlined: a weak out-of-line copy could be interposed by
                        # libtorch's own (unchecked) empty_generic at load time.
                        "\nC10_ALWAYS_INLINE TensorBase empty_generic(\n"
                        "    IntArrayRef size,\n"
                        "    c10::Allocator* allocator,\n"
                        "    c10::DispatchKeySet ks,\n"
                        "    ScalarType scalar_type,\n"
                        "    std::optional<c10::MemoryFormat> memory_format_opt) {\n"
                        "  TORCH_CHECK(\n"
                        "      scalar_type != ScalarType::Double,\n"
                        "      \"Unsupported dtype: float64 (Double) dtype is not supported by "
                        "this device\");\n"
                        "  return empty_generic_symint(\n"
                        "      c10::fromIntArrayRefSlow(size), allocator, ks, scalar_type,\n"
                        "      memory_format_opt);\n"
                        "}\n"),
        ),
    ),
    Mutant(
        name="rename-privateuse1-backend-removed",
        imitates="a torch.utils Python API the backend calls at import is renamed "
        "(torch.utils.rename_privateuse1_backend -> set_privateuse1_backend_name)",
        pr=None,
        expect=Expected(Stage.IMPORT, _UP, Subtype.SYMBOL_REMOVED,
                        {"symbol": r"^rename_privateuse1_backend$"}),
        edits=(
            Replace("utils/__init__.py", "    rename_privateuse1_backend,\n",
                    "    rename_privateuse1_backend as set_privateuse1_backend_name,\n"),
        ),
    ),
    Mutant(
        name="manual-seed-hook-required",
        imitates="torch.manual_seed starts requiring a device-module hook the backend lacks "
        "(is_current_stream_capturing, to refuse re-seeding during graph capture)",
        pr=None,
        expect=Expected(Stage.TEST, _UP, Subtype.NEW_HOOK_REQUIRED,
                        {"hook": r"^is_current_stream_capturing$"}),
        edits=(
            Replace("random.py", _SEED_ALL,
                    "            if not getattr(custom_device_mod, _bad_fork_name)():\n"
                    "                capturing = torch.utils.backend_registration"
                    "._get_custom_mod_func(\n"
                    "                    \"is_current_stream_capturing\"\n"
                    "                )\n"
                    "                if capturing():\n"
                    "                    raise RuntimeError(\"cannot re-seed a device RNG "
                    "while its stream is capturing\")\n"
                    "                getattr(custom_device_mod, _seed_all_name)(seed)\n"),
        ),
    ),
    Mutant(
        name="to-backend-null-deref",
        imitates="a crash in a new code path the suite exercises: Tensor.<backend>() / "
        "Storage.<backend>() without a device index reads the current device through a "
        "null pointer (SIGSEGV)",
        pr=None,
        expect=Expected(Stage.TEST, _UP, Subtype.CRASH, {"test": r"::"}),
        edits=(
            Replace("utils/backend_registration.py", _CURRENT_DEVICE_DEFAULT,
                    "    if device is None:\n"
                    "        import ctypes\n\n"
                    "        # The new cached current-device lookup, through a pointer still "
                    "null.\n"
                    "        ctypes.c_int64.from_address(0).value  # SIGSEGV\n"
                    "        return _get_current_device_index()\n"),
        ),
    ),
    Mutant(
        name="is-backend-property-regression",
        imitates="a behaviour change a contract test catches: the generated Tensor.is_<backend> "
        "property compares against the pre-rename key name and is always False",
        pr=None,
        expect=Expected(Stage.TEST, _UP, Subtype.TEST_REGRESSION, {"test": r"::"}),
        edits=(
            Replace("utils/backend_registration.py", _IS_BACKEND_TAIL,
                    _IS_BACKEND_TAIL.replace("== custom_backend_name", "== \"privateuseone\"")),
        ),
    ),
)

_BY_NAME = {m.name: m for m in MUTANTS}


def names() -> list[str]:
    return [m.name for m in MUTANTS]


def get(name: str) -> Mutant:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise MutantError(
            f"unknown mutant {name!r}; known mutants: {', '.join(names())}"
        ) from None


def select(only: list[str] | None) -> list[Mutant]:
    """The named mutants in catalogue order (all when ``only`` is empty)."""
    if not only:
        return list(MUTANTS)
    wanted = {get(n).name for n in only}
    return [m for m in MUTANTS if m.name in wanted]
