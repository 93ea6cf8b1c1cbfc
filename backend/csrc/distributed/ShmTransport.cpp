#include "distributed/ShmTransport.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

namespace openreg::distributed {

namespace {

constexpr uint64_t kMagic = 0x6f63636c5f763031ULL;  // "occl_v01"
constexpr size_t kAlign = 64;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct SlotMeta {
  uint64_t bytes;
  uint32_t tag;
  uint32_t pad;
};

struct RingControl {
  alignas(kAlign) std::atomic<uint64_t> head;  // slots published (producer)
  alignas(kAlign) std::atomic<uint64_t> tail;  // slots consumed (consumer)
};

// How long a sleeper waits before it looks at its peers' pids and the abort
// flag again: the bound on how late a dead peer is noticed.
constexpr auto kWaitSlice = std::chrono::milliseconds(100);
// Re-checks before sleeping: a peer on another core often publishes the next
// slot within microseconds, cheaper than a futex round trip.
constexpr int kSpins = 64;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

uint32_t* futex_word(std::atomic<uint32_t>& word) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  return reinterpret_cast<uint32_t*>(&word);
}

[[noreturn]] void fail(const std::string& what) {
  C10_THROW_ERROR(DistBackendError, "occl: " + what);
}

} // namespace

struct ShmTransport::Segment {
  alignas(kAlign) uint64_t magic;
  int32_t pid;
  int32_t size;
  alignas(kAlign) std::atomic<uint32_t> doorbell;
  alignas(kAlign) std::atomic<uint32_t> sleepers;
  // rings follow at align_up(sizeof(Segment))
};

struct ShmTransport::Ring {
  RingControl* ctl;
  SlotMeta* meta;
  char* data;
};

ShmTransport::ShmTransport(int rank, int size, std::string prefix, TransportConfig config)
    : rank_(rank), size_(size), config_(config), prefix_(std::move(prefix)) {
  TORCH_CHECK(config_.slots > 0 && config_.slot_bytes % kAlign == 0 && config_.slot_bytes > 0,
              "occl: slot size must be a positive multiple of ", kAlign);
  ring_bytes_ = align_up(sizeof(RingControl)) + align_up(config_.slots * sizeof(SlotMeta)) +
                config_.slots * config_.slot_bytes;
  segment_bytes_ = align_up(sizeof(Segment)) + ring_bytes_ * size_ * kChannels;
  segments_.assign(size_, nullptr);

  const std::string name = name_of(rank_);
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    fail("shm_open(" + name + ") failed: " + std::strerror(errno));
  }
  if (ftruncate(fd, static_cast<off_t>(segment_bytes_)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    fail("ftruncate of " + name + " failed: " + std::strerror(err));
  }
  void* base = mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    fail("mmap of " + name + " failed: " + std::strerror(errno));
  }
  // The file starts zeroed: every head, tail and doorbell is 0.
  auto* seg = static_cast<Segment*>(base);
  seg->pid = static_cast<int32_t>(getpid());
  seg->size = size_;
  std::atomic_thread_fence(std::memory_order_release);
  seg->magic = kMagic;
  segments_[rank_] = seg;
}

ShmTransport::~ShmTransport() {
  for (auto* seg : segments_) {
    if (seg != nullptr) {
      munmap(seg, segment_bytes_);
    }
  }
  if (!unlinked_) {
    shm_unlink(name_of(rank_).c_str());
  }
}

void ShmTransport::open_peers() {
  for (int peer = 0; peer < size_; ++peer) {
    if (segments_[peer] != nullptr) {
      continue;
    }
    const std::string name = name_of(peer);
    const int fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) {
      fail("cannot open rank " + std::to_string(peer) + "'s segment " + name + ": " +
           std::strerror(errno));
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != segment_bytes_) {
      close(fd);
      fail("rank " + std::to_string(peer) + "'s segment has another size: ranks disagree on "
           "the group size or the ring configuration");
    }
    void* base = mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) {
      fail("mmap of " + name + " failed: " + std::strerror(errno));
    }
    auto* seg = static_cast<Segment*>(base);
    if (seg->magic != kMagic || seg->size != size_) {
      munmap(base, segment_bytes_);
      fail("segment " + name + " is not an occl segment of this group");
    }
    segments_[peer] = seg;
  }
}

void ShmTransport::unlink_own() {
  if (!unlinked_) {
    shm_unlink(name_of(rank_).c_str());
    unlinked_ = true;
  }
}

ShmTransport::Ring ShmTransport::ring(int owner, int src, Channel channel) const {
  char* base = reinterpret_cast<char*>(segments_[owner]) + align_up(sizeof(Segment)) +
               ring_bytes_ * (static_cast<size_t>(src) * kChannels + static_cast<int>(channel));
  Ring r{};
  r.ctl = reinterpret_cast<RingControl*>(base);
  r.meta = reinterpret_cast<SlotMeta*>(base + align_up(sizeof(RingControl)));
  r.data = base + align_up(sizeof(RingControl)) + align_up(config_.slots * sizeof(SlotMeta));
  return r;
}

void ShmTransport::ring_doorbell(int rank) {
  Segment* seg = segments_[rank];
  seg->doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (seg->sleepers.load(std::memory_order_seq_cst) > 0) {
    syscall(SYS_futex, futex_word(seg->doorbell), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
  }
}

void ShmTransport::wait_doorbell(uint32_t seen, std::chrono::steady_clock::time_point deadline) {
  Segment* own = segments_[rank_];
  for (int i = 0; i < kSpins; ++i) {
    if (own->doorbell.load(std::memory_order_acquire) != seen) {
      return;
    }
    cpu_relax();
  }
  const auto now = std::chrono::steady_clock::now();
  if (now >= deadline) {
    fail("timed out waiting for a peer (rank " + std::to_string(rank_) +
         "): a collective or send/recv that not every rank issued?");
  }
  const auto slice = std::min<std::chrono::nanoseconds>(deadline - now, kWaitSlice);
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(slice.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(slice.count() % 1000000000);
  own->sleepers.fetch_add(1, std::memory_order_seq_cst);
  // FUTEX_WAIT returns at once if the doorbell moved since `seen`.
  syscall(SYS_futex, futex_word(own->doorbell), FUTEX_WAIT, seen, &ts, nullptr, 0);
  own->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  if (own->doorbell.load(std::memory_order_acquire) == seen) {
    check_peers_alive();
  }
}

void ShmTransport::check_peers_alive() const {
  if (aborted_.load()) {
    fail("the process group was aborted or destroyed");
  }
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && kill(segments_[peer]->pid, 0) != 0 && errno == ESRCH) {
      fail("rank " + std::to_string(peer) + " (pid " + std::to_string(segments_[peer]->pid) +
           ") exited");
    }
  }
}

void ShmTransport::abort() {
  aborted_.store(true);
  ring_doorbell(rank_);
  Segment* own = segments_[rank_];
  syscall(SYS_futex, futex_word(own->doorbell), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void ShmTransport::run(std::vector<SendSpec> sends, std::vector<RecvSpec> recvs,
                       std::chrono::steady_clock::time_point deadline) {
  const size_t slots = config_.slots;
  const size_t slot_bytes = config_.slot_bytes;
  auto slots_of = [&](size_t bytes) { return std::max<size_t>(1, (bytes + slot_bytes - 1) / slot_bytes); };
  auto piece_of = [&](size_t bytes, size_t index) {
    return std::min(slot_bytes, bytes - std::min(bytes, index * slot_bytes));
  };

  struct Progress {
    Ring ring;
    size_t total;
    size_t done = 0;
  };
  std::vector<Progress> out;
  std::vector<Progress> in;
  for (const auto& s : sends) {
    TORCH_CHECK(s.peer >= 0 && s.peer < size_ && s.peer != rank_, "occl: bad peer ", s.peer);
    out.push_back({ring(s.peer, rank_, s.channel), slots_of(s.bytes)});
  }
  for (const auto& r : recvs) {
    TORCH_CHECK(r.peer >= 0 && r.peer < size_ && r.peer != rank_, "occl: bad peer ", r.peer);
    in.push_back({ring(rank_, r.peer, r.channel), slots_of(r.bytes)});
  }

  Segment* own = segments_[rank_];
  size_t next_recv = 0;
  for (;;) {
    if (aborted_.load(std::memory_order_relaxed)) {
      fail("the process group was aborted or destroyed");
    }
    const uint32_t seen = own->doorbell.load(std::memory_order_acquire);
    bool progress = false;
    bool pending = false;

    for (size_t i = 0; i < out.size(); ++i) {
      auto& p = out[i];
      const auto& spec = sends[i];
      if (p.done == p.total) {
        continue;
      }
      RingControl* ctl = p.ring.ctl;
      uint64_t head = ctl->head.load(std::memory_order_relaxed);
      const uint64_t tail = ctl->tail.load(std::memory_order_acquire);
      while (p.done < p.total && head - tail < slots) {
        const size_t slot = head % slots;
        const size_t piece = piece_of(spec.bytes, p.done);
        if (piece > 0) {
          std::memcpy(p.ring.data + slot * slot_bytes,
                      static_cast<const char*>(spec.data) + p.done * slot_bytes, piece);
        }
        p.ring.meta[slot].bytes = piece;
        p.ring.meta[slot].tag = spec.tag;
        ++head;
        ++p.done;
        ctl->head.store(head, std::memory_order_release);
        ring_doorbell(spec.peer);
        progress = true;
      }
      pending = pending || p.done < p.total;
    }

    while (next_recv < in.size()) {
      auto& p = in[next_recv];
      const auto& spec = recvs[next_recv];
      RingControl* ctl = p.ring.ctl;
      const uint64_t head = ctl->head.load(std::memory_order_acquire);
      uint64_t tail = ctl->tail.load(std::memory_order_relaxed);
      while (p.done < p.total && tail < head) {
        const size_t slot = tail % slots;
        const size_t piece = piece_of(spec.bytes, p.done);
        const SlotMeta meta = p.ring.meta[slot];
        if (meta.bytes != piece || meta.tag != spec.tag) {
          fail("message from rank " + std::to_string(spec.peer) + " does not match: expected " +
               std::to_string(piece) + " bytes with tag " + std::to_string(spec.tag) + ", got " +
               std::to_string(meta.bytes) + " bytes with tag " + std::to_string(meta.tag) +
               " (collectives issued in another order, or send/recv sizes or tags that differ)");
        }
        char* dst = static_cast<char*>(spec.data) + p.done * slot_bytes;
        const char* src = p.ring.data + slot * slot_bytes;
        if (piece > 0) {
          if (spec.reduce) {
            spec.reduce(dst, src, piece);
          } else {
            std::memcpy(dst, src, piece);
          }
        }
        ++tail;
        ++p.done;
        ctl->tail.store(tail, std::memory_order_release);
        ring_doorbell(spec.peer);
        progress = true;
      }
      if (p.done < p.total) {
        break;
      }
      ++next_recv;
    }
    pending = pending || next_recv < in.size();

    if (!pending) {
      return;
    }
    if (!progress) {
      wait_doorbell(seen, deadline);
    }
  }
}

} // namespace openreg::distributed
