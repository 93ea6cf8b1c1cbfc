#include "serialization/BackendMeta.h"

#include <torch/csrc/jit/serialization/pickler_helper.h>

namespace openreg::serialization {

namespace {

constexpr const char* kNzKey = "openreg.nz_format";

struct OpenRegBackendMeta final : public c10::BackendMeta {
  explicit OpenRegBackendMeta(bool nz) : nz_format(nz) {}
  c10::intrusive_ptr<c10::BackendMeta> clone(
      const c10::intrusive_ptr<c10::BackendMeta>&) const override {
    return c10::make_intrusive<OpenRegBackendMeta>(nz_format);
  }
  bool nz_format;
};

// [backend-meta]
// torch.save: called through torch._C._get_tensor_metadata for openreg tensors.
void to_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& m) {
  if (nz_format(t)) {
    m[kNzKey] = true;
  }
}

// torch.load: the map written above, applied to the rebuilt tensor (also when
// map_location moved it, as long as it lands on openreg).
void from_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& m) {
  const auto it = m.find(kNzKey);
  if (it != m.end()) {
    set_nz_format(t, it->second);
    m.erase(it);
  }
}

struct Register {
  Register() {
    torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &to_metadata,
                                          &from_metadata);
  }
} register_backend_meta;
// [/backend-meta]

} // namespace

void set_nz_format(const at::Tensor& t, bool value) {
  TORCH_CHECK(t.device().is_privateuseone(), "nz_format is an openreg tensor property");
  t.unsafeGetTensorImpl()->set_backend_meta(c10::make_intrusive<OpenRegBackendMeta>(value));
}

bool nz_format(const at::Tensor& t) {
  auto* meta = dynamic_cast<OpenRegBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  return meta != nullptr && meta->nz_format;
}

} // namespace openreg::serialization
