// Per-device random generators.
//
// The state is an mt19937 CPUGeneratorImpl held inside a PrivateUse1
// generator: random ops that run through the CPU fallback are handed the inner
// CPU generator (see cpu_generator_for), so seeding torch.openreg affects them
// and get/set_rng_state round-trips exactly like on CPU.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

namespace openreg {

class OpenRegGeneratorImpl final : public c10::GeneratorImpl {
 public:
  explicit OpenRegGeneratorImpl(c10::DeviceIndex device,
                                uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // A CPU generator sharing this generator's engine (same object, not a copy).
  at::Generator cpu_generator() const;

 private:
  OpenRegGeneratorImpl* clone_impl() const override;
  static uint64_t substream_seed(uint64_t seed, uint64_t offset);

  c10::intrusive_ptr<at::CPUGeneratorImpl> cpu_;
  // Guarded by cpu_->mutex_. The engine's own seed differs from seed_ while
  // offset_ != 0 (see set_offset).
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device = -1);
at::Generator new_generator(c10::DeviceIndex device = -1);

// For kernels that run on the CPU: the CPU generator to use for an optional
// openreg generator argument (the device's default generator when empty).
at::Generator cpu_generator_for(const std::optional<at::Generator>& gen,
                                c10::DeviceIndex device);

} // namespace openreg
