// Reader::verify: every chunk's checksum and decoding, and an accounting of every byte.
//
// The bytes are fetched as a load fetches them: the chunks (and the padding gaps a
// one-generation file must hold as zeros) are grouped by coalesce_fetches, the planner of
// every read, into ranges of the backend's preferred size, fetched in parallel. On a remote
// file a verify therefore costs about as many requests as a full load, not one per chunk.
#include <algorithm>
#include <mutex>

#include "codec/checksum.h"
#include "format/validate.h"
#include "read/check_request.h"
#include "read/read_plan.h"
#include "read/read_scratch.h"
#include "read/reader_impl.h"
#include "util/thread_pool.h"

namespace jtree {
namespace {

constexpr size_t kMaxProblems = 1000;         // keep reports of badly damaged files readable
constexpr uint64_t kMaxGapCheckBytes = 64ull << 20;

// Chunk number -> (leaf, chunk within leaf), for messages.
std::vector<std::pair<uint32_t, uint64_t>> chunk_owners(const Tree& t, uint64_t n) {
  std::vector<std::pair<uint32_t, uint64_t>> owners(n);
  for (uint32_t l = 0; l < t.leaves.size(); ++l) {
    const Leaf& leaf = t.leaves[l];
    if (leaf.storage != Storage::kChunked) continue;
    const uint64_t count = Tree::chunk_count(leaf);
    for (uint64_t k = 0; k < count; ++k) owners[leaf.first_chunk + k] = {l, k};
  }
  return owners;
}

// What one fetched extent holds: a chunk to check, or a gap that must be all zeros.
struct Item {
  bool is_gap = false;
  uint64_t chunk = 0;            // chunks
  uint64_t begin = 0, end = 0;   // gaps
};

}  // namespace

Result<VerifyReport> Reader::verify(const ReadOptions& options) const {
  JTREE_RETURN_IF_ERROR(check_read_options(*this, options));
  const Impl& impl = *impl_;
  const Tree& t = impl.file.tree.tree();  // Verify walks every leaf: the whole Tree is worth building
  const FileInfo& info = impl.file.info;
  const uint64_t n = impl.file.index.chunks.size();
  if (n > UINT32_MAX) {
    return Status::resource_exhausted(name() + ": verify of more than 2^32 chunks");
  }
  const auto owners = chunk_owners(t, n);
  VerifyReport report;
  std::mutex mu;

  auto add_problem = [&](std::string where, Status st) {
    std::lock_guard<std::mutex> lock(mu);
    if (report.problems.size() < kMaxProblems) report.problems.push_back({std::move(where), st});
  };

  // Accounting first (it needs no data): every byte of the committed extent is metadata, a
  // live chunk, or a gap.
  std::vector<std::pair<uint64_t, uint64_t>> live;
  for (const auto& m : impl.file.metadata) live.emplace_back(m.offset, m.offset + m.size);
  if (const uint64_t h = info.checkpoint_head_offset; h != 0) {
    // Segment 0 of a multi-process save: its copy of the checkpoint's head, for the commit
    // (spec/FORMAT.md, 11.1), lies between its header and its chunk data.
    const uint64_t end = h + format::kPreambleSize + info.header_size;  // sizes are validated
    Status head_status = format::check_head_placement(
        h, end - h, info.header_offset + info.header_size,
        info.segments.empty() ? 0 : info.segments[0].file_offset);
    if (head_status.ok()) {
      std::vector<std::byte> header(info.header_size), copy(end - h);
      ReadRange r[2] = {{info.header_offset, header}, {h, copy}};
      JTREE_RETURN_IF_ERROR(impl.source->read(r));
      head_status = format::check_checkpoint_head(copy, header);
      live.emplace_back(h, end);
    }
    if (!head_status.ok()) add_problem("checkpoint head", head_status.with_prefix(name()));
  }
  std::vector<Item> items;
  std::vector<FetchExtent> extents;
  uint64_t total = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const ChunkInfo c = impl.chunk(i);
    if (c.absent) continue;
    live.emplace_back(c.file_offset, c.file_offset + c.stored_size);
    extents.push_back({c.file_offset, c.stored_size, static_cast<uint32_t>(items.size())});
    items.push_back({false, i, 0, 0});
    total += c.stored_size;
  }
  std::sort(live.begin(), live.end());
  const uint64_t committed_end = info.footer_offset + format::kFooterSize;
  std::vector<std::pair<uint64_t, uint64_t>> gaps;
  uint64_t pos = 0;
  for (const auto& [b, e] : live) {
    if (b > pos) gaps.emplace_back(pos, b);
    pos = std::max(pos, e);
  }
  if (committed_end > pos) gaps.emplace_back(pos, committed_end);
  uint64_t gap_bytes = 0;
  for (const auto& [b, e] : gaps) gap_bytes += e - b;
  report.dead_bytes = gap_bytes;
  if (info.file_size > committed_end) {
    report.notes.push_back(std::to_string(info.file_size - committed_end) +
                           " bytes after the last committed footer (an interrupted append); "
                           "the next append or compact removes them");
  }
  // A file of one generation has no dead bytes: its gaps are alignment padding, all zero.
  // They are fetched with their neighbouring chunks.
  if (info.generation == 0 && gap_bytes <= kMaxGapCheckBytes) {
    for (const auto& [b, e] : gaps) {
      extents.push_back({b, e - b, static_cast<uint32_t>(items.size())});
      items.push_back({true, 0, b, e});
    }
  }
  std::sort(extents.begin(), extents.end(),
            [](const FetchExtent& a, const FetchExtent& b) { return a.offset < b.offset; });
  const ReadOptions fetch = impl.fetch_options(options);
  const std::vector<FetchUnit> units = coalesce_fetches(extents, fetch);

  auto check_chunk = [&](uint64_t i, std::span<const std::byte> stored, ReadScratch& s) {
    const ChunkInfo c = impl.chunk(i);
    const auto leaf_id = owners[i].first;
    const auto local = owners[i].second;
    const Leaf& leaf = t.leaves[leaf_id];
    // Named only when something is wrong: building a path for every chunk costs more than
    // checking it.
    auto where = [&] { return "leaf " + t.leaf_path(leaf_id) + " chunk " + std::to_string(local); };
    if (xxh3(stored, c.seed) != c.checksum) {
      add_problem(where(), impl.checksum_error(c, leaf_id, local));
    } else {
      const uint64_t raw_size = format::chunk_raw_size(leaf, local);
      grow(s.raw, raw_size);
      const std::span<std::byte> raw(s.raw.data(), raw_size);
      Status dec = codec::decode_chunk(stored, c.encoding, Impl::format_of(leaf), raw, s.codec);
      if (!dec.ok()) {
        add_problem(where(), dec.with_prefix(impl.chunk_where(leaf_id, local)));
      } else if (leaf.dtype == DType::kBool && !format::bools_valid(raw)) {
        // Section 6.3: loads hand bytes on as stored; a whole-file check looks at them.
        add_problem(where(), Status::corruption(impl.chunk_where(leaf_id, local) +
                                                ": bool payload byte other than 0 or 1"));
      }
    }
  };
  auto check_gap = [&](const Item& g, std::span<const std::byte> bytes) {
    auto nz = std::find_if(bytes.begin(), bytes.end(), [](std::byte x) { return x != std::byte{0}; });
    if (nz != bytes.end()) {
      add_problem("bytes [" + std::to_string(g.begin) + ", " + std::to_string(g.end) + ")",
                  Status::corruption(name() + ": unaccounted non-zero bytes at offset " +
                                     std::to_string(g.begin + (nz - bytes.begin()))));
    }
  };

  uint64_t done = 0;
  const int parallelism = impl.fetch_parallelism(fetch);
  ReadScratchCache::Use use(ReadScratchCache::shared());  // (sets kept while the check runs)
  Status st = parallel_for(
      pool_for(parallelism), units.size(), parallelism, [&](size_t u) -> Status {
        const FetchUnit& unit = units[u];
        ReadScratchCache::Lease scratch(ReadScratchCache::shared());
        grow(scratch->fetch, unit.size);
        const std::span<std::byte> buffer(scratch->fetch.data(), unit.size);
        ReadRange r{unit.offset, buffer};
        Status io = impl.source->read(std::span(&r, 1));
        if (!io.ok()) return io;  // storage failures end the check: nothing more is knowable
        uint64_t chunks = 0, bytes = 0;
        for (uint32_t id : unit.jobs) {
          const Item& item = items[id];
          const uint64_t at = item.is_gap ? item.begin : impl.chunk(item.chunk).file_offset;
          const uint64_t size = item.is_gap ? item.end - item.begin
                                            : impl.chunk(item.chunk).stored_size;
          const auto piece = std::span<const std::byte>(buffer).subspan(at - unit.offset, size);
          if (item.is_gap) {
            check_gap(item, piece);
            continue;
          }
          check_chunk(item.chunk, piece, *scratch);
          chunks++;
          bytes += size;
        }
        std::lock_guard<std::mutex> lock(mu);
        report.chunks_checked += chunks;
        report.bytes_checked += bytes;
        done += bytes;
        if (options.progress && !options.progress(done, total)) {
          return Status::aborted(name() + ": verify cancelled");
        }
        return Status::success();
      });
  JTREE_RETURN_IF_ERROR(st);
  std::sort(report.problems.begin(), report.problems.end(),
            [](const VerifyProblem& a, const VerifyProblem& b) { return a.where < b.where; });
  return report;
}

}  // namespace jtree
