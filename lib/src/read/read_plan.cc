#include "read/read_plan.h"

#include <algorithm>
#include <unordered_map>

#include "format/chunk_grid.h"

namespace jtree {

std::vector<FetchUnit> coalesce_fetches(std::span<const FetchExtent> sorted,
                                        const ReadOptions& options) {
  std::vector<FetchUnit> units;
  for (const FetchExtent& x : sorted) {
    if (!units.empty()) {
      FetchUnit& u = units.back();
      const uint64_t end = u.offset + u.size;
      const uint64_t new_end = std::max(end, x.offset + x.size);
      if (x.offset >= end && x.offset - end <= options.coalesce_gap &&
          new_end - u.offset <= options.max_fetch_bytes) {
        u.size = new_end - u.offset;
        u.jobs.push_back(x.id);
        continue;
      }
    }
    units.push_back(FetchUnit{x.offset, x.size, {x.id}});
  }
  return units;
}

std::vector<StreamUnit> cut_stream(const ReadPlan& plan, std::span<const uint32_t> jobs,
                                   const ReadOptions& options) {
  const uint64_t max_bytes = std::max<uint64_t>(options.max_fetch_bytes, 1);
  std::vector<StreamUnit> units;
  for (uint32_t j : jobs) {
    const ChunkJob& job = plan.jobs[j];
    for (uint64_t done = 0; done < job.stored_size;) {
      const uint64_t at = job.file_offset + done;
      StreamUnit* u = units.empty() ? nullptr : &units.back();
      // A new request where this piece is not the unit's near neighbour, or the unit is full.
      if (u == nullptr || at < u->offset + u->size ||
          at - (u->offset + u->size) > options.coalesce_gap ||
          at - u->offset >= max_bytes) {
        units.push_back(StreamUnit{at, 0, {}});
        u = &units.back();
      }
      const uint64_t n = std::min(job.stored_size - done, u->offset + max_bytes - at);
      u->pieces.push_back(ChunkPiece{j, done, n});
      u->size = at + n - u->offset;
      done += n;
    }
  }
  return units;
}

Result<ReadPlan> plan_reads(const ReadTree& tree, const format::IndexData& index,
                            std::span<const ReadRequest> requests, std::span<const Box> boxes,
                            const ReadOptions& options) {
  ReadPlan plan;
  std::unordered_map<uint64_t, uint32_t> job_of_chunk;  // only needed with several requests
  const bool dedupe = requests.size() > 1;
  for (uint32_t r = 0; r < requests.size(); ++r) {
    const Leaf& leaf = tree.leaf(requests[r].leaf);
    if (leaf.storage != Storage::kChunked) continue;
    const Box& want = boxes[r];
    const format::ChunkGrid grid = format::ChunkGrid::of(leaf);
    Shape lo, hi;
    grid.overlapping(want, lo, hi);
    const size_t rank = grid.rank();
    bool empty = false;
    for (size_t d = 0; d < rank; ++d) empty |= lo[d] >= hi[d];
    if (empty) continue;
    Shape g = lo;
    for (;;) {
      const uint64_t local = grid.linear(g);
      const uint64_t chunk = leaf.first_chunk + local;
      const format::ChunkRecord& rec = index.chunks[chunk];
      if (rec.flags & format::kChunkAbsent) {
        return Status::not_found("leaf " + tree.leaf_path(requests[r].leaf) + ": chunk " +
                                std::to_string(local) +
                                " is not stored in this file (a segment of a multi-host save)");
      }
      uint32_t job_index;
      auto it = dedupe ? job_of_chunk.find(chunk) : job_of_chunk.end();
      if (it != job_of_chunk.end()) {
        job_index = it->second;
      } else {
        job_index = static_cast<uint32_t>(plan.jobs.size());
        if (dedupe) job_of_chunk.emplace(chunk, job_index);
        ChunkJob job;
        job.chunk = chunk;
        job.leaf = requests[r].leaf;
        job.local = local;
        job.box = grid.box(local);
        job.file_offset = index.segments[rec.segment].file_offset + rec.offset;
        job.stored_size = rec.stored_size;
        plan.jobs.push_back(std::move(job));
      }
      ChunkJob& job = plan.jobs[job_index];
      ChunkTarget t;
      t.request = r;
      t.chunk_start.resize(rank);
      t.dst_start.resize(rank);
      t.region.resize(rank);
      for (size_t d = 0; d < rank; ++d) {
        uint64_t b = std::max(job.box.begin[d], want.begin[d]);
        uint64_t e = std::min(job.box.end[d], want.end[d]);
        t.chunk_start[d] = b - job.box.begin[d];
        t.dst_start[d] = b - want.begin[d];
        t.region[d] = e - b;
      }
      job.targets.push_back(std::move(t));
      // Next grid coordinate in [lo, hi), row-major.
      size_t d = rank;
      while (d-- > 0) {
        if (++g[d] < hi[d]) break;
        g[d] = lo[d];
      }
      if (d == static_cast<size_t>(-1)) break;
    }
  }

  // Fetch units: chunks by file offset, neighbours within the gap merged up to a size.
  std::vector<FetchExtent> extents(plan.jobs.size());
  for (uint32_t i = 0; i < extents.size(); ++i) {
    extents[i] = {plan.jobs[i].file_offset, plan.jobs[i].stored_size, i};
  }
  std::sort(extents.begin(), extents.end(),
            [](const FetchExtent& a, const FetchExtent& b) { return a.offset < b.offset; });
  plan.units = coalesce_fetches(extents, options);
  for (const FetchUnit& u : plan.units) plan.fetch_bytes += u.size;
  return plan;
}

}  // namespace jtree
