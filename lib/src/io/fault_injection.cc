// Fault-injecting Source and Sink decorators (see fault_injection.h).
#include "io/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "io/posix_file.h"

namespace jtree {

std::optional<FaultKind> FaultInjector::next(const char* op) {
  const uint64_t n = count_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (log_.size() < 4096) log_ += std::string(log_.empty() ? "" : " ") + op;
  }
  if (n == plan_.fail_at || (plan_.sticky && n > plan_.fail_at)) {
    fired_.store(true);
    return plan_.kind;
  }
  return std::nullopt;
}

std::string FaultInjector::log() const {
  std::lock_guard<std::mutex> lock(mu_);
  return log_;
}

namespace {

Status injected(const std::string& name, const char* what) {
  return Status::io_error(name + ": injected fault: " + what);
}

[[noreturn]] void die_now() {
  ::kill(::getpid(), SIGKILL);
  std::abort();  // not reached
}

class FaultySource final : public Source {
 public:
  FaultySource(std::shared_ptr<Source> inner, std::shared_ptr<FaultInjector> f)
      : inner_(std::move(inner)), f_(std::move(f)) {}

  const std::string& name() const override { return inner_->name(); }

  Result<uint64_t> size() override {
    if (auto k = f_->next("size")) {
      if (*k == FaultKind::kKill) die_now();
      if (*k != FaultKind::kCorrupt) return injected(name(), "size failed");
    }
    return inner_->size();
  }

  Status read(std::span<const ReadRange> ranges) override {
    const auto k = f_->next("read");
    if (!k) return inner_->read(ranges);
    switch (*k) {
      case FaultKind::kError: return injected(name(), "read error");
      case FaultKind::kKill: die_now();
      case FaultKind::kShort:
      case FaultKind::kNoSpace: {
        // Only the first half of the first range arrives; the rest of it is garbage.
        if (ranges.empty()) return injected(name(), "short read");
        std::vector<ReadRange> part(ranges.begin(), ranges.begin() + 1);
        part[0].dst = part[0].dst.first(part[0].dst.size() / 2);
        (void)inner_->read(part);
        for (std::byte& b : ranges[0].dst.subspan(part[0].dst.size())) b = std::byte{0xA5};
        return injected(name(), "short read");
      }
      case FaultKind::kCorrupt: {
        JTREE_RETURN_IF_ERROR(inner_->read(ranges));
        for (const ReadRange& r : ranges) {
          if (r.dst.empty()) continue;
          r.dst[r.dst.size() / 2] ^= std::byte{0x40};  // a storage layer that lies
          break;
        }
        return Status::success();
      }
    }
    return injected(name(), "read");
  }

  IoStats stats() const override { return inner_->stats(); }
  int preferred_concurrency() const override { return inner_->preferred_concurrency(); }
  std::string etag() const override { return inner_->etag(); }

 private:
  std::shared_ptr<Source> inner_;
  std::shared_ptr<FaultInjector> f_;
};

class FaultySink final : public Sink {
 public:
  FaultySink(std::unique_ptr<Sink> inner, std::shared_ptr<FaultInjector> f)
      : inner_(std::move(inner)), f_(std::move(f)) {}

  const std::string& name() const override { return inner_->name(); }
  uint64_t position() const override { return inner_->position(); }
  bool can_patch() const override { return inner_->can_patch(); }
  IoStats stats() const override { return inner_->stats(); }

  Status append(std::span<const std::byte> data) override {
    const auto k = f_->next("append");
    if (!k) return inner_->append(data);
    switch (*k) {
      case FaultKind::kError: return injected(name(), "write error");
      case FaultKind::kShort:
        (void)inner_->append(data.first(data.size() / 2));
        return injected(name(), "short write");
      case FaultKind::kNoSpace:
        (void)inner_->append(data.first(data.size() / 2));
        return errno_status(name(), "write (injected)", ENOSPC);
      case FaultKind::kCorrupt: {
        // A disk that lies: the write "succeeds" with one byte changed.
        std::vector<std::byte> copy(data.begin(), data.end());
        if (!copy.empty()) copy[copy.size() / 2] ^= std::byte{0x40};
        return inner_->append(copy);
      }
      case FaultKind::kKill:
        // Half of this write reaches the file (pushed out of the sink's buffer), then death.
        (void)inner_->append(data.first(data.size() / 2));
        (void)inner_->sync();
        die_now();
    }
    return injected(name(), "append");
  }

  Status append_from(std::string_view path_or_url, uint64_t offset, uint64_t size) override {
    if (auto k = f_->next("append_from")) {
      if (*k == FaultKind::kKill) die_now();
      if (*k != FaultKind::kCorrupt) return injected(name(), "copy error");
    }
    return inner_->append_from(path_or_url, offset, size);
  }

  Status sync() override {
    if (auto k = f_->next("sync")) {
      if (*k == FaultKind::kKill) die_now();
      if (*k == FaultKind::kNoSpace) return errno_status(name(), "fsync (injected)", ENOSPC);
      if (*k != FaultKind::kCorrupt) return errno_status(name(), "fsync (injected)", EIO);
    }
    return inner_->sync();
  }

  Status patch(uint64_t offset, std::span<const std::byte> data) override {
    const auto k = f_->next("patch");
    if (!k || *k == FaultKind::kCorrupt) return inner_->patch(offset, data);
    switch (*k) {
      case FaultKind::kError: return injected(name(), "patch error");
      case FaultKind::kKill:
        (void)inner_->patch(offset, data.first(data.size() / 2));
        die_now();
      default:
        (void)inner_->patch(offset, data.first(data.size() / 2));
        return injected(name(), "torn patch");
    }
  }

  Status commit() override {
    if (auto k = f_->next("commit")) {
      if (*k == FaultKind::kKill) die_now();
      // The commit does not happen; the writer aborts the sink.
      if (*k != FaultKind::kCorrupt) return injected(name(), "commit failed");
    }
    return inner_->commit();
  }

  void abort() noexcept override { inner_->abort(); }

 private:
  std::unique_ptr<Sink> inner_;
  std::shared_ptr<FaultInjector> f_;
};

std::mutex g_hooks_mu;
const IoHooks* g_hooks = nullptr;

}  // namespace

std::shared_ptr<Source> faulty_source(std::shared_ptr<Source> inner,
                                      std::shared_ptr<FaultInjector> injector) {
  return std::make_shared<FaultySource>(std::move(inner), std::move(injector));
}

std::unique_ptr<Sink> faulty_sink(std::unique_ptr<Sink> inner,
                                  std::shared_ptr<FaultInjector> injector) {
  return std::make_unique<FaultySink>(std::move(inner), std::move(injector));
}

IoHookScope::IoHookScope(IoHooks hooks) : hooks_(std::move(hooks)) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  g_hooks = &hooks_;
}

IoHookScope::~IoHookScope() {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  if (g_hooks == &hooks_) g_hooks = nullptr;
}

std::shared_ptr<Source> apply_io_hooks(std::shared_ptr<Source> source) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  if (g_hooks == nullptr || !g_hooks->source) return source;
  return g_hooks->source(std::move(source));
}

std::unique_ptr<Sink> apply_io_hooks(std::unique_ptr<Sink> sink) {
  std::lock_guard<std::mutex> lock(g_hooks_mu);
  if (g_hooks == nullptr || !g_hooks->sink) return sink;
  return g_hooks->sink(std::move(sink));
}

}  // namespace jtree
