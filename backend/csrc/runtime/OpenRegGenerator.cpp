#include "runtime/OpenRegGenerator.h"

#include <deque>
#include <mutex>

#include "runtime/OpenRegFunctions.h"

namespace openreg {

OpenRegGeneratorImpl::OpenRegGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      cpu_(c10::make_intrusive<at::CPUGeneratorImpl>(seed)),
      seed_(seed) {}

// Callers hold this generator's mutex_; the CPU fallback holds cpu_'s. Taking
// cpu_'s too keeps a Python-side seed/state call from racing a kernel.
void OpenRegGeneratorImpl::set_current_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(cpu_->mutex_);
  cpu_->set_current_seed(seed);
  seed_ = seed;
  offset_ = 0;
}

// [generator-offset]
// A Philox generator (CUDA's) is a pure function of (seed, offset), so an
// offset names a reproducible position. The mt19937 engine here cannot jump
// ahead cheaply, so an offset names a reproducible sub-stream instead: the
// engine restarts from a seed mixed from (seed, offset). Same seed and offset,
// same numbers; offset 0 is the seed's own stream. Unlike Philox's, the
// offset does not advance as numbers are drawn.
void OpenRegGeneratorImpl::set_offset(uint64_t offset) {
  std::lock_guard<std::mutex> lock(cpu_->mutex_);
  offset_ = offset;
  cpu_->set_current_seed(offset == 0 ? seed_ : substream_seed(seed_, offset));
}

uint64_t OpenRegGeneratorImpl::get_offset() const {
  std::lock_guard<std::mutex> lock(cpu_->mutex_);
  return offset_;
}

uint64_t OpenRegGeneratorImpl::substream_seed(uint64_t seed, uint64_t offset) {
  // splitmix64 of the pair: neighbouring offsets give unrelated engines.
  uint64_t z = seed ^ (offset * 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
// [/generator-offset]

uint64_t OpenRegGeneratorImpl::current_seed() const {
  std::lock_guard<std::mutex> lock(cpu_->mutex_);
  return seed_;
}

uint64_t OpenRegGeneratorImpl::seed() {
  std::lock_guard<std::mutex> lock(cpu_->mutex_);
  seed_ = cpu_->seed();
  offset_ = 0;
  return seed_;
}

// The state is the CPU engine's; it carries the engine's seed (the mixed one
// after set_offset), so a restored state starts again at offset 0.
void OpenRegGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  std::lock_guard<std::mutex> lock(cpu_->mutex_);
  cpu_->set_state(new_state);
  seed_ = cpu_->current_seed();
  offset_ = 0;
}

c10::intrusive_ptr<c10::TensorImpl> OpenRegGeneratorImpl::get_state() const {
  std::lock_guard<std::mutex> lock(cpu_->mutex_);
  return cpu_->get_state();
}

at::Generator OpenRegGeneratorImpl::cpu_generator() const {
  return at::Generator(cpu_);
}

OpenRegGeneratorImpl* OpenRegGeneratorImpl::clone_impl() const {
  auto* copy = new OpenRegGeneratorImpl(device().index());
  std::lock_guard<std::mutex> lock(cpu_->mutex_);
  copy->cpu_->set_state(*cpu_->get_state());
  copy->seed_ = seed_;
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::deque<at::Generator> generators;
  std::call_once(once, [] {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      generators.emplace_back(at::make_generator<OpenRegGeneratorImpl>(i));
    }
  });
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return generators[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return at::make_generator<OpenRegGeneratorImpl>(device);
}

at::Generator cpu_generator_for(const std::optional<at::Generator>& gen,
                                c10::DeviceIndex device) {
  const at::Generator& source =
      gen.has_value() && gen->defined() ? *gen : default_generator(device);
  if (source.device().is_cpu()) {
    return source;
  }
  TORCH_CHECK(
      source.device().is_privateuseone(),
      "expected an openreg or CPU generator, got one for ", source.device());
  return source.get<OpenRegGeneratorImpl>()->cpu_generator();
}

} // namespace openreg
