#include "cuda/staging_plan.h"

#include <algorithm>
#include <map>

namespace jtree::staging {

void cut_box(uint32_t request, const Box& box, const Shape& chunk_shape, uint64_t item,
             uint64_t max_bytes, std::vector<Piece>& out) {
  const Shape shape = box.shape();
  const size_t rank = shape.size();
  for (uint64_t e : shape) {
    if (e == 0) return;
  }
  if (rank == 0) {
    out.push_back({request, box, 0, item});
    return;
  }
  // inner[d]: destination bytes of one index along d (everything after d whole).
  std::vector<uint64_t> inner(rank);
  inner[rank - 1] = item;
  for (size_t d = rank - 1; d > 0; --d) inner[d - 1] = inner[d] * shape[d];
  size_t k = 0;
  while (inner[k] > max_bytes) ++k;  // inner[rank - 1] = item <= max_bytes ends it
  uint64_t rows = std::min<uint64_t>(max_bytes / inner[k], shape[k]);
  // Whole chunks per piece when the box starts on a chunk boundary along k: a raw chunk then
  // lands in one buffer in one piece, and the reader reads it there without a copy.
  if (k < chunk_shape.size() && chunk_shape[k] > 0 && box.begin[k] % chunk_shape[k] == 0 &&
      rows >= chunk_shape[k] && rows < shape[k]) {
    rows -= rows % chunk_shape[k];
  }
  std::vector<uint64_t> idx(k, 0);  // over the dimensions before k
  for (;;) {
    uint64_t base = 0;
    for (size_t d = 0; d < k; ++d) base += idx[d] * inner[d];
    for (uint64_t j = 0; j < shape[k]; j += rows) {
      const uint64_t n = std::min(rows, shape[k] - j);
      Piece p;
      p.request = request;
      p.box = box;
      for (size_t d = 0; d < k; ++d) {
        p.box.begin[d] = box.begin[d] + idx[d];
        p.box.end[d] = p.box.begin[d] + 1;
      }
      p.box.begin[k] = box.begin[k] + j;
      p.box.end[k] = p.box.begin[k] + n;
      p.dst_offset = base + j * inner[k];
      p.bytes = n * inner[k];
      out.push_back(std::move(p));
    }
    size_t d = k;
    while (d-- > 0) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
}

std::vector<Batch> pack_pieces(const std::vector<Piece>& pieces, uint64_t buffer_bytes) {
  std::vector<Batch> out;
  uint64_t used = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const uint64_t at = round_up_64(used);
    if (out.empty() || at + pieces[i].bytes > buffer_bytes) {
      out.push_back({i, i, {}, 0, {}, false, 0, 0, {}, {}});
      used = 0;
    }
    Batch& b = out.back();
    const uint64_t off = round_up_64(used);
    b.offsets.push_back(off);
    b.last = i + 1;
    b.bytes += pieces[i].bytes;
    used = off + pieces[i].bytes;
  }
  return out;
}

std::vector<Batch> pack_pieces_direct(const std::vector<Piece>& pieces,
                                      const std::vector<uint64_t>& file_offsets,
                                      uint64_t buffer_bytes, uint64_t offset_align,
                                      uint64_t memory_align) {
  auto round_up = [](uint64_t n, uint64_t a) { return (n + a - 1) & ~(a - 1); };
  const uint64_t place_align = std::max<uint64_t>(64, memory_align);
  std::vector<Batch> out;
  uint64_t used = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const uint64_t bytes = pieces[i].bytes;
    uint64_t at = 0, length = 0, file_start = 0, head = 0;
    bool direct = file_offsets[i] != kNoFileRun;
    if (direct) {
      head = file_offsets[i] % offset_align;
      file_start = file_offsets[i] - head;
      length = round_up(file_offsets[i] + bytes, offset_align) - file_start;
      direct = length <= buffer_bytes;
      if (!direct) head = 0;
    }
    const uint64_t need = direct ? length : bytes;
    at = direct ? round_up(used, place_align) : round_up_64(used);
    if (out.empty() || at + need > buffer_bytes) {
      out.push_back({i, i, {}, 0, {}, false, 0, 0, {}, {}});
      used = 0;
      at = 0;
    }
    Batch& b = out.back();
    b.offsets.push_back(at + head);
    if (direct) b.direct.push_back({i, at, file_start, length});
    b.last = i + 1;
    b.bytes += bytes;
    used = at + need;
  }
  return out;
}

std::vector<Batch> pack_pieces_mapped(const std::vector<Piece>& pieces,
                                      const std::vector<uint64_t>& file_offsets,
                                      uint64_t buffer_bytes, uint64_t window, uint64_t page,
                                      uint64_t file_size) {
  auto page_down = [page](uint64_t n) { return n & ~(page - 1); };
  const uint64_t limit = page_down(file_size + page - 1);
  window = std::max(page, page_down(window));
  std::map<uint64_t, Batch> by_window;  // (file order)
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (file_offsets[i] == kNoFileRun) continue;
    uint64_t at = file_offsets[i], done = 0;
    while (done < pieces[i].bytes) {
      const uint64_t w = at / window;
      const uint64_t n = std::min(pieces[i].bytes - done, (w + 1) * window - at);
      Batch& b = by_window[w];
      if (b.parts.empty()) {
        b.mapped = true;
        b.map_begin = page_down(at);
      }
      if (done == 0) b.verified.push_back(i);
      b.parts.push_back({i, at, done, n});
      b.bytes += n;
      b.map_begin = std::min(b.map_begin, page_down(at));
      b.map_end = std::max(b.map_end, std::min(limit, page_down(at + n + page - 1)));
      at += n;
      done += n;
    }
  }
  std::vector<Batch> out;
  for (auto& [w, b] : by_window) out.push_back(std::move(b));
  size_t i = 0;
  while (i < pieces.size()) {
    if (file_offsets[i] != kNoFileRun) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < pieces.size() && file_offsets[j] == kNoFileRun) ++j;
    // (pack_pieces over the run, its piece numbers shifted back to the load's.)
    const std::vector<Piece> run(pieces.begin() + i, pieces.begin() + j);
    for (Batch& b : pack_pieces(run, buffer_bytes)) {
      b.first += i;
      b.last += i;
      out.push_back(std::move(b));
    }
    i = j;
  }
  return out;
}

}  // namespace jtree::staging
