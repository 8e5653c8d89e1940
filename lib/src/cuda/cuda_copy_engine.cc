// The CUDA CopyEngine (built only with JTREE_CUDA on): plain C++ over the CUDA runtime API,
// linked statically (libcudart_static), so libjtree needs no CUDA library at run time beyond
// the driver, which the runtime loads itself when a device is first used.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cuda/device_scope.h"
#include "cuda/pinned_cache.h"
#include "jtree/device.h"
#include "util/per_process.h"
#include "util/populated_memory.h"

namespace jtree {

namespace {

using cuda_detail::DeviceScope;

// Pinned staging buffers kept between loads, shared by every engine of the process (pinned
// memory is portable: one block serves every device). Never destroyed: at exit the CUDA
// runtime may already be gone, and the process's memory goes back to the system anyway.
// One per process (util/per_process.h): a child of fork() has none of its parent's blocks
// mapped (map_populated's memory is not inherited), cannot use CUDA, and may find the
// parent's mutex held by a thread it does not have; it starts an empty cache of its own.
struct SharedPinnedCache {
  std::mutex mu;
  staging::PinnedCache cache{kPinnedCacheBytes};
  // Notified when a block pinned ahead (pin_staging_buffers_async) arrives or is given up.
  std::condition_variable arrival;
  // Blocks pinned with cudaHostRegister over map_populated memory (the others came from
  // cudaHostAlloc): each is freed the way it was made.
  std::set<std::byte*> registered;
  // The device current when each block was pinned: current again while it is freed, which may
  // happen on any thread (one without a context would otherwise get one on device 0).
  std::map<std::byte*, int> pinned_on;

  // Frees a block (under mu).
  void free_block(std::byte* p, size_t size) {
    auto on = pinned_on.find(p);
    DeviceScope scope(on == pinned_on.end() ? -1 : on->second);
    if (on != pinned_on.end()) pinned_on.erase(on);
    if (registered.erase(p) > 0) {
      if (cudaHostUnregister(p) != cudaSuccess) (void)cudaGetLastError();
      unmap_populated({p, size});
    } else if (cudaFreeHost(p) != cudaSuccess) {
      (void)cudaGetLastError();
    }
  }
};
SharedPinnedCache& pinned_cache() {
  static PerProcess<SharedPinnedCache> cache;
  return cache.get([] { return std::make_unique<SharedPinnedCache>(); });
}

// Threads that fault in a new staging buffer before it is registered (util/populated_memory.h).
int populate_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

Status cuda_error(std::string_view what, cudaError_t e, std::string_view where) {
  return Status::io_error(std::string(where) + ": " + std::string(what) + ": " +
                         cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

// Whether staging buffers are faulted in as transparent huge pages (map_populated's default);
// with JTREE_STAGING_NO_HUGE_PAGES set, small pages, for comparisons (gpu_breakdown.py's
// dev-small-pages), as JTREE_CODEC_NO_AVX2 is for the codec.
bool staging_huge_pages() {
  static const bool huge = std::getenv("JTREE_STAGING_NO_HUGE_PAGES") == nullptr;
  return huge;
}

// A new pinned block of `bytes` on `device`, the calling thread's current device (portable:
// pinned for every device), not yet in the cache; pinned_cache() knows how to free it.
Result<std::span<std::byte>> pin_block(size_t bytes, int device, const std::string& name) {
  // Pages faulted in by several threads, then registered: several times faster than
  // cudaHostAlloc, which faults them in on one thread (util/populated_memory.h).
  Result<std::span<std::byte>> mem =
      map_populated(bytes, populate_threads(), staging_huge_pages());
  // Why the first way failed, for the message should the fallback fail too (a limit on
  // locked memory refuses both; the first one's reason is the telling one).
  std::string first_failure;
  if (mem.ok()) {
    const cudaError_t r = cudaHostRegister(mem->data(), bytes, cudaHostRegisterPortable);
    if (r == cudaSuccess) {
      SharedPinnedCache& c = pinned_cache();
      std::lock_guard<std::mutex> lock(c.mu);
      c.registered.insert(mem->data());
      c.pinned_on[mem->data()] = device;
      return *mem;
    }
    (void)cudaGetLastError();  // (clears it: cudaHostAlloc below is the fallback)
    unmap_populated(*mem);
    first_failure = std::string("cudaHostRegister: ") + cudaGetErrorName(r);
  } else {
    first_failure = mem.status().message();
  }
  void* p = nullptr;
  const cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // (clears it: later calls must not report this failure)
    const Status st = cuda_error("cudaHostAlloc of " + std::to_string(bytes) + " bytes", e, name);
    const std::string message = st.message() + " (tried first: " + first_failure + ")";
    return e == cudaErrorMemoryAllocation ? Status::resource_exhausted(message)
                                          : Status(st.code(), message);
  }
  SharedPinnedCache& c = pinned_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.pinned_on[static_cast<std::byte*>(p)] = device;
  return std::span<std::byte>(static_cast<std::byte*>(p), bytes);
}

// The threads of pin_staging_buffers_async, joined at exit (a thread still pinning then must
// not outlive the CUDA runtime: this object is made after the runtime started, so it is
// destroyed before the runtime's own exit handlers run).
struct Pinners {
  const pid_t owner = ::getpid();
  std::mutex mu;
  std::vector<std::pair<std::thread, std::shared_ptr<std::atomic<bool>>>> threads;
  ~Pinners() {
    if (::getpid() != owner) {
      // (Not a PerProcess object: this one must be destroyed at exit, to join its threads.)
      // A child of fork() exiting: the threads are its parent's, not here to be joined (a
      // join would wait forever). Left alone: a std::thread still joinable when destroyed
      // would end the process.
      (void)new std::vector(std::move(threads));
      return;
    }
    for (auto& [t, done] : threads) {
      if (t.joinable()) t.join();
    }
  }
  // Joins the threads that have finished (under mu).
  void reap() {
    std::erase_if(threads, [](auto& entry) {
      if (!entry.second->load()) return false;
      entry.first.join();
      return true;
    });
  }
};

class CudaCopyEngine final : public CopyEngine {
 public:
  explicit CudaCopyEngine(int device)
      : device_(device), name_("cuda:" + std::to_string(device)) {}
  ~CudaCopyEngine() override {
    DeviceScope scope(device_);
    for (auto& [id, s] : streams_) {
      (void)cudaStreamSynchronize(s);
      (void)cudaStreamDestroy(s);
    }
  }

  std::string name() const override { return name_; }

  Result<std::span<std::byte>> allocate_pinned(size_t bytes) override {
    bytes = std::max<size_t>(bytes, 1);
    {
      SharedPinnedCache& c = pinned_cache();
      std::unique_lock<std::mutex> lock(c.mu);
      for (;;) {
        std::span<std::byte> kept = c.cache.take(bytes);
        if (!kept.empty()) return kept;
        // A block being pinned ahead of this load comes sooner than one pinned now.
        if (!c.cache.awaits(bytes)) break;
        c.arrival.wait(lock);
      }
    }
    DeviceScope scope(device_);
    if (scope.status() != cudaSuccess) return cuda_error("cudaSetDevice", scope.status(), name_);
    JTREE_ASSIGN_OR_RETURN(std::span<std::byte> block, pin_block(bytes, device_, name_));
    SharedPinnedCache& c = pinned_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    c.cache.lend(block.data(), bytes);
    return block;
  }

  // Back into the process's cache, or freed when the cache is full.
  void free_pinned(std::span<std::byte> buffer) override {
    if (buffer.data() == nullptr) return;
    SharedPinnedCache& c = pinned_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    size_t size = buffer.size();
    if (!c.cache.give(buffer.data(), size)) c.free_block(buffer.data(), size);
  }

  Result<int> create_stream() override {
    DeviceScope scope(device_);
    if (scope.status() != cudaSuccess) return cuda_error("cudaSetDevice", scope.status(), name_);
    cudaStream_t s = nullptr;
    // Non-blocking: no implicit synchronization with the legacy default stream, so copies run
    // alongside whatever else the application does on the device.
    const cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) return cleared_error("cudaStreamCreateWithFlags", e);
    std::lock_guard<std::mutex> lock(mu_);
    const int id = next_++;
    streams_[id] = s;
    return id;
  }

  void destroy_stream(int stream) override {
    cudaStream_t s = take(stream);
    if (s == nullptr) return;
    DeviceScope scope(device_);
    (void)cudaStreamDestroy(s);
  }

  Status copy_async(void* dst, const std::byte* src, size_t bytes, int stream) override {
    cudaStream_t s = find(stream);
    if (s == nullptr) return Status::invalid_argument(name_ + ": no stream " + std::to_string(stream));
    DeviceScope scope(device_);
    if (scope.status() != cudaSuccess) return cuda_error("cudaSetDevice", scope.status(), name_);
    // cudaMemcpyDefault: the runtime tells device, managed and host destinations apart (UVA).
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
    if (e != cudaSuccess) return cleared_error("cudaMemcpyAsync", e);
    return Status::success();
  }

  // Zero copy (DeviceOptions::zero_copy): the pages of a file mapping, registered read-only
  // (the driver pins them where they are in the page cache; without the flag it would ask for
  // write access, which a copy-on-write mapping grants by copying every page). Portable, as
  // the staging buffers. Devices that cannot register read-only memory say so.
  Status register_host(const std::byte* p, size_t bytes) override {
    DeviceScope scope(device_);
    if (scope.status() != cudaSuccess) return cuda_error("cudaSetDevice", scope.status(), name_);
    int read_only = 0;
    if (cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, device_) !=
            cudaSuccess ||
        read_only == 0) {
      (void)cudaGetLastError();
      return Status::not_supported(name_ + " cannot register read-only host memory "
                                   "(cudaDevAttrHostRegisterReadOnlySupported is 0)");
    }
    const cudaError_t e =
        cudaHostRegister(const_cast<std::byte*>(p), bytes,
                         cudaHostRegisterPortable | cudaHostRegisterReadOnly);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // (clears it: later calls must not report this failure)
      return cuda_error("cudaHostRegister of " + std::to_string(bytes) + " mapped file bytes", e,
                        name_);
    }
    return Status::success();
  }

  void unregister_host(const std::byte* p) override {
    DeviceScope scope(device_);  // (any thread: see device_scope.h)
    if (cudaHostUnregister(const_cast<std::byte*>(p)) != cudaSuccess) (void)cudaGetLastError();
  }

  Status sync(int stream) override {
    cudaStream_t s = find(stream);
    if (s == nullptr) return Status::invalid_argument(name_ + ": no stream " + std::to_string(stream));
    DeviceScope scope(device_);
    const cudaError_t e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) return cleared_error("cudaStreamSynchronize", e);
    return Status::success();
  }

 private:
  // The error of a failed call, cleared from the runtime's last error: a program that shares
  // jtree's runtime (a C or C++ program linking libjtree) must not find it in its own
  // cudaGetLastError() later.
  Status cleared_error(std::string_view what, cudaError_t e) const {
    (void)cudaGetLastError();
    return cuda_error(what, e, name_);
  }

  cudaStream_t find(int stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(stream);
    return it == streams_.end() ? nullptr : it->second;
  }
  cudaStream_t take(int stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) return nullptr;
    cudaStream_t s = it->second;
    streams_.erase(it);
    return s;
  }

  const int device_;
  const std::string name_;
  std::mutex mu_;
  std::map<int, cudaStream_t> streams_;
  int next_ = 0;
};

}  // namespace

bool cuda_built() { return true; }

uint64_t release_pinned_memory() {
  SharedPinnedCache& c = pinned_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  const uint64_t bytes = c.cache.cached_bytes();
  for (const auto& [p, size] : c.cache.drain()) c.free_block(p, size);
  return bytes;
}

Status pin_staging_buffers_async(const DeviceOptions& options) {
  if (Status st = options.check(); !st.ok()) return st;
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<CopyEngine> engine,
                         make_cuda_copy_engine(options.device));  // (the device exists)
  // As the staging pipeline sizes a large load's buffers (staging.cc: per_buffer).
  const size_t size = static_cast<size_t>(options.staging_bytes) /
                      static_cast<size_t>(options.staging_buffers);
  size_t missing = 0;
  {
    SharedPinnedCache& c = pinned_cache();
    std::lock_guard<std::mutex> lock(c.mu);
    const size_t have = c.cache.count(size);
    const size_t want = static_cast<size_t>(options.staging_buffers);
    // No more than the cache can keep: a block pinned ahead that does not fit is freed when
    // it arrives, and the load then pins its own (loads to several devices at once, or
    // staging over the cache's size, would pay for pinning twice).
    missing = std::min(have >= want ? 0 : want - have, c.cache.room_for(size));
    for (size_t i = 0; i < missing; ++i) c.cache.expect(size);
  }
  if (missing == 0) return Status::success();
  static Pinners pinners;  // (made after the runtime started: make_cuda_copy_engine above)
  auto done = std::make_shared<std::atomic<bool>>(false);
  const int device = options.device;
  auto pin = [size, missing, device, done] {
    SharedPinnedCache& c = pinned_cache();
    size_t resolved = 0;  // expected blocks that arrived or were given up
    try {
      DeviceScope scope(device);
      const std::string name = "cuda:" + std::to_string(device);
      for (; resolved < missing; ++resolved) {
        Result<std::span<std::byte>> block =
            scope.status() == cudaSuccess ? pin_block(size, device, name) : Status::io_error(name);
        {
          std::lock_guard<std::mutex> lock(c.mu);
          if (!block.ok()) {
            c.cache.given_up(size);  // (a load pins its own, and reports its own error)
          } else if (!c.cache.arrived(block->data(), size)) {
            c.free_block(block->data(), size);
          }
        }
        c.arrival.notify_all();
      }
    } catch (...) {
      // (Out of memory in a string, say: no load may wait for blocks that will not come.)
      std::lock_guard<std::mutex> lock(c.mu);
      for (; resolved < missing; ++resolved) c.cache.given_up(size);
    }
    c.arrival.notify_all();
    done->store(true);
  };
  std::thread t;
  try {
    t = std::thread(pin);
  } catch (...) {
    // (No thread: no block will come, and no load may wait for one. A load pins its own.)
    SharedPinnedCache& c = pinned_cache();
    {
      std::lock_guard<std::mutex> lock(c.mu);
      for (size_t i = 0; i < missing; ++i) c.cache.given_up(size);
    }
    c.arrival.notify_all();
    return Status::success();
  }
  std::lock_guard<std::mutex> lock(pinners.mu);
  pinners.reap();
  pinners.threads.emplace_back(std::move(t), std::move(done));
  return Status::success();
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

Result<std::unique_ptr<CopyEngine>> make_cuda_copy_engine(int device) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::not_supported(std::string("jtree: no CUDA device: cudaGetDeviceCount: ") +
                                cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }
  if (n == 0) return Status::not_supported("jtree: no CUDA device (cudaGetDeviceCount: 0)");
  if (device < 0 || device >= n) {
    return Status::invalid_argument("jtree: CUDA device " + std::to_string(device) +
                                   " out of range (" + std::to_string(n) + " devices)");
  }
  return std::unique_ptr<CopyEngine>(new CudaCopyEngine(device));
}

}  // namespace jtree
