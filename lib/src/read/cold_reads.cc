// See cold_reads.h.
#include "read/cold_reads.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "util/thread_pool.h"

namespace jtree::cold {
namespace {

std::atomic<uint64_t> g_direct_bytes{0};  // direct_bytes_read_for_testing

}  // namespace

bool use_direct(const Source& source, std::span<const io::FileExtent> merged,
                io::DirectReadSupport& support) {
  uint64_t total = 0;
  for (const io::FileExtent& e : merged) total += e.size;
  if (total < kMinDirectBytes) return false;
  // (Not a local file: "not available", and nothing opened or asked.)
  support = io::direct_read_support(source);
  if (!support.available) return false;
  const std::optional<double> cached = io::cached_fraction(source, merged);
  return cached && *cached < io::kCachedEnough;
}

int queue_depth(const ReadOptions& options) {
  const uint64_t wanted =
      static_cast<uint64_t>(std::max(kMinQueueDepth, resolve_threads(options.threads)));
  return static_cast<int>(std::clamp<uint64_t>(options.max_bytes_in_flight / kPartBytes, 1,
                                               wanted));
}

uint64_t part_alignment(const io::DirectReadSupport& support) {
  return std::max(support.offset_align, support.memory_align);
}

Status read_part(Source& source, const Part& part) {
  Result<uint64_t> n = io::read_direct(source, part.file_offset, {part.dst, part.length});
  if (n.ok()) {
    if (*n < part.needed) {
      return Status::io_error(source.name() + ": unexpected end of file at offset " +
                             std::to_string(part.file_offset + *n) + " (O_DIRECT read)");
    }
    g_direct_bytes.fetch_add(*n, std::memory_order_relaxed);
    return Status::success();
  }
  if (!n.status().is_not_supported()) return n.status();
  // The kernel refused this read (an alignment it wants bigger than it reported): the bytes
  // the load needs, buffered.
  ReadRange range{part.file_offset, {part.dst, part.needed}};
  return source.read(std::span(&range, 1));
}

uint64_t direct_bytes_read_for_testing() {
  return g_direct_bytes.load(std::memory_order_relaxed);
}

}  // namespace jtree::cold
