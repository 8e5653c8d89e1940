// A Source over bytes held in memory (tests, embedded files).
#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "jtree/io.h"

namespace jtree {
namespace {

class MemorySource final : public Source {
 public:
  MemorySource(std::vector<std::byte> bytes, std::string name)
      : bytes_(std::move(bytes)), name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  Result<uint64_t> size() override { return static_cast<uint64_t>(bytes_.size()); }

  // bytes_ never changes after construction, so concurrent reads need no lock.
  Status read(std::span<const ReadRange> ranges) override {
    for (const ReadRange& r : ranges) {
      const uint64_t size = bytes_.size();
      const uint64_t len = r.dst.size();
      if (r.offset > size || len > size - r.offset) {
        return Status::io_error(name_ + ": unexpected end of file at offset " +
                               std::to_string(r.offset) + " (wanted " + std::to_string(len) +
                               " bytes, file has " + std::to_string(size) + ")");
      }
      // memcpy's pointers must be non-null even for 0 bytes; an empty span may hold null.
      if (len > 0) std::memcpy(r.dst.data(), bytes_.data() + r.offset, len);
      read_requests_.fetch_add(1, std::memory_order_relaxed);
      bytes_read_.fetch_add(len, std::memory_order_relaxed);
    }
    return Status::success();
  }

  std::span<const std::byte> mapping() const override { return bytes_; }

  IoStats stats() const override {
    IoStats s;
    s.read_requests = read_requests_.load(std::memory_order_relaxed);
    s.bytes_read = bytes_read_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  const std::vector<std::byte> bytes_;
  const std::string name_;
  std::atomic<uint64_t> read_requests_{0};
  std::atomic<uint64_t> bytes_read_{0};
};

}  // namespace

std::shared_ptr<Source> memory_source(std::vector<std::byte> bytes, std::string name) {
  return std::make_shared<MemorySource>(std::move(bytes), std::move(name));
}

}  // namespace jtree
