#include "cuda/host_copy_engine.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>

#include <unistd.h>

#include "codec/checksum.h"

namespace jtree::staging {

HostCopyEngine::HostCopyEngine() : HostCopyEngine(Options{}) {}
HostCopyEngine::HostCopyEngine(Options options) : options_(options) {}

HostCopyEngine::~HostCopyEngine() {
  std::vector<int> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, s] : streams_) left.push_back(id);
  }
  for (int id : left) destroy_stream(id);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, n] : buffers_) std::free(const_cast<std::byte*>(p));
}

Result<std::span<std::byte>> HostCopyEngine::allocate_pinned(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int64_t>(allocate_calls_++) == options_.throw_allocation_at) {
    throw std::bad_alloc();
  }
  if (bytes > options_.max_pinned_bytes - std::min(stats_.pinned_bytes, options_.max_pinned_bytes)) {
    return Status::resource_exhausted(name() + ": cannot pin " + std::to_string(bytes) +
                                     " more bytes");
  }
  // Page-aligned, as cudaHostAlloc's buffers are: loads read raw chunks into them with
  // O_DIRECT, which needs aligned memory (the staging falls back to buffered reads otherwise).
  const size_t n = (std::max<size_t>(bytes, 1) + 4095) & ~size_t{4095};
  auto* p = static_cast<std::byte*>(std::aligned_alloc(4096, n));
  if (p == nullptr) return Status::resource_exhausted(name() + ": out of memory");
  buffers_[p] = bytes;
  stats_.pinned_bytes += bytes;
  stats_.peak_pinned_bytes = std::max(stats_.peak_pinned_bytes, stats_.pinned_bytes);
  ++stats_.allocations;
  return std::span<std::byte>(p, bytes);
}

bool HostCopyEngine::pending_from(const std::byte* begin, const std::byte* end) const {
  for (const auto& [id, s] : streams_) {
    if (s->busy && s->running_src < end && s->running_src + s->running_bytes > begin) return true;
    for (const Copy& c : s->queue) {
      if (c.src < end && c.src + c.bytes > begin) return true;
    }
  }
  return false;
}

// Whether [begin, begin + bytes) lies inside one pinned buffer or one registered range: a
// real device copies asynchronously only from such memory.
bool HostCopyEngine::copyable_from(const std::byte* begin, size_t bytes) const {
  for (const auto* ranges : {&buffers_, &registered_}) {
    auto it = ranges->upper_bound(begin);
    if (it == ranges->begin()) continue;
    --it;
    if (begin + bytes <= it->first + it->second) return true;
  }
  return false;
}

Status HostCopyEngine::register_host(const std::byte* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t n = register_calls_++;
  if (!options_.can_register) return CopyEngine::register_host(p, bytes);
  if (options_.fail_register_at >= 0 && n == static_cast<uint64_t>(options_.fail_register_at)) {
    return Status::io_error(name() + ": injected failure of registration " + std::to_string(n));
  }
  // As cudaHostRegister asks: whole pages, and no page registered twice.
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto align = static_cast<uintptr_t>(page > 0 ? page : 4096);
  auto overlaps = [&] {
    auto it = registered_.upper_bound(p);
    if (it != registered_.end() && it->first < p + bytes) return true;
    return it != registered_.begin() && std::prev(it)->first + std::prev(it)->second > p;
  };
  if (bytes == 0 || reinterpret_cast<uintptr_t>(p) % align != 0 || overlaps()) {
    ++stats_.misuses;
    return Status::invalid_argument(name() + ": bad registration");
  }
  registered_[p] = bytes;
  ++stats_.registrations;
  stats_.registered_bytes += bytes;
  stats_.peak_registered_bytes = std::max(stats_.peak_registered_bytes, stats_.registered_bytes);
  return Status::success();
}

void HostCopyEngine::unregister_host(const std::byte* p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = registered_.find(p);
  if (it == registered_.end()) {
    ++stats_.misuses;
    return;
  }
  if (pending_from(p, p + it->second)) ++stats_.misuses;
  stats_.registered_bytes -= it->second;
  ++stats_.unregistrations;
  registered_.erase(it);
}

void HostCopyEngine::free_pinned(std::span<std::byte> buffer) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buffers_.find(buffer.data());
  if (it == buffers_.end()) {
    ++stats_.misuses;
    return;
  }
  if (pending_from(buffer.data(), buffer.data() + buffer.size())) ++stats_.misuses;
  stats_.pinned_bytes -= it->second;
  ++stats_.frees;
  std::free(buffer.data());
  buffers_.erase(it);
}

Result<int> HostCopyEngine::create_stream() {
  std::lock_guard<std::mutex> lock(mu_);
  const int id = next_stream_++;
  auto s = std::make_unique<Stream>();
  Stream* raw = s.get();
  s->worker = std::thread([this, raw] { run(raw); });
  streams_[id] = std::move(s);
  ++stats_.streams_created;
  return id;
}

void HostCopyEngine::destroy_stream(int stream) {
  std::unique_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end()) {
      ++stats_.misuses;
      return;
    }
    if (!it->second->queue.empty() || it->second->busy) ++stats_.misuses;  // not synced
    s = std::move(it->second);
    streams_.erase(it);
    s->stop = true;
    ++stats_.streams_destroyed;
  }
  cv_.notify_all();
  s->worker.join();
}

Status HostCopyEngine::copy_async(void* dst, const std::byte* src, size_t bytes, int stream) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t n = stats_.copies_issued++;
  if (options_.fail_copy_at >= 0 && n == static_cast<uint64_t>(options_.fail_copy_at)) {
    return Status::io_error(name() + ": injected failure of copy " + std::to_string(n));
  }
  auto it = streams_.find(stream);
  if (it == streams_.end()) {
    ++stats_.misuses;
    return Status::invalid_argument(name() + ": no stream " + std::to_string(stream));
  }
  if (!copyable_from(src, bytes)) ++stats_.misuses;  // (neither pinned nor registered)
  const bool fail = options_.fail_async_at >= 0 && n == static_cast<uint64_t>(options_.fail_async_at);
  it->second->queue.push_back({dst, src, bytes, xxh3({src, bytes}), fail});
  queued_bytes_ += bytes;
  stats_.peak_queued_bytes = std::max(stats_.peak_queued_bytes, queued_bytes_);
  lock.unlock();
  cv_.notify_all();
  return Status::success();
}

Status HostCopyEngine::sync(int stream) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = streams_.find(stream);
  if (it == streams_.end()) {
    ++stats_.misuses;
    return Status::invalid_argument(name() + ": no stream " + std::to_string(stream));
  }
  Stream* s = it->second.get();
  ++stats_.syncs;
  cv_.wait(lock, [s] { return s->queue.empty() && !s->busy; });
  Status st = std::move(s->error);
  s->error = Status::success();
  return st;
}

void HostCopyEngine::run(Stream* s) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [s] { return s->stop || !s->queue.empty(); });
    if (s->queue.empty()) return;  // stopped
    Copy c = s->queue.front();
    s->queue.pop_front();
    s->busy = true;
    s->running_src = c.src;
    s->running_bytes = c.bytes;
    lock.unlock();
    if (options_.copy_delay_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(options_.copy_delay_us));
    }
    const bool changed = xxh3({c.src, c.bytes}) != c.hash;
    if (!c.fail) std::memcpy(c.dst, c.src, c.bytes);
    lock.lock();
    if (changed) ++stats_.misuses;
    if (c.fail && s->error.ok()) {
      s->error = Status::io_error(name() + ": injected asynchronous failure of a copy");
    }
    if (!c.fail) stats_.bytes_copied += c.bytes;
    ++stats_.copies_done;
    queued_bytes_ -= c.bytes;
    s->busy = false;
    cv_.notify_all();
  }
}

HostCopyEngine::Stats HostCopyEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace jtree::staging
