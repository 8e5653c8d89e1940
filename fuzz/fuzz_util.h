// Shared helpers of the fuzz targets: the input split (payload in front, options at the tail),
// hash repair for structure-aware fuzzing, parser limit presets, an in-memory Sink, and the
// assertion that turns a wrong answer into a finding.
//
// Every target is a plain LLVMFuzzerTestOneInput(): libFuzzer drives it in fuzz builds (clang),
// and fuzz/replay_main.cc replays the committed corpora and past crashes through it in every
// build (gcc too), under ctest.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "codec/checksum.h"
#include "format/index_codec.h"
#include "format/layout.h"
#include "jtree/jtree.h"
#include "util/endian.h"

namespace jtree::fuzz {

/// A finding that is not a crash: a wrong answer. Aborts so that libFuzzer (and the replay
/// driver) report the input.
[[noreturn]] inline void fail(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "jtree fuzz: %s%s%s\n", what, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}
#define JTREE_FUZZ_CHECK(cond, detail)                       \
  do {                                                       \
    if (!(cond)) ::jtree::fuzz::fail("check failed: " #cond, (detail)); \
  } while (0)

/// An input cut in two: the payload (its front) and a fixed-size options trailer (its last N
/// bytes, zero-filled when the input is shorter). Options live at the tail so that mutating
/// them never shifts the payload, and a seed is a valid file followed by N option bytes.
template <size_t N>
struct Split {
  std::span<const std::byte> payload;
  std::array<uint8_t, N> opt{};

  Split(const uint8_t* data, size_t size) {
    const size_t n = size < N ? size : N;
    std::memcpy(opt.data(), data + (size - n), n);
    payload = {reinterpret_cast<const std::byte*>(data), size - n};
  }
  uint16_t u16(size_t at) const { return static_cast<uint16_t>(opt[at] | (opt[at + 1] << 8)); }
  uint32_t u32(size_t at) const { return u16(at) | (static_cast<uint32_t>(u16(at + 2)) << 16); }
};

/// Parser limits by a selector: 0 the defaults, 1 tight (what a small server would set for
/// untrusted files), 2 tiny (every limit within reach of a small input), 3 defaults with a
/// small leaf/total budget.
inline Limits limits_for(uint8_t selector) {
  Limits l;
  switch (selector % 4) {
    case 1:
      l.max_header_bytes = 1 << 20;
      l.max_index_bytes = 1 << 20;
      l.max_nodes = l.max_leaves = 10000;
      l.max_depth = 32;
      l.max_rank = 8;
      l.max_chunk_bytes = 1 << 20;
      l.max_string_bytes = 1024;
      l.max_leaf_bytes = l.max_total_bytes = 64 << 20;
      break;
    case 2:
      l.max_header_bytes = l.max_index_bytes = 512;
      l.max_nodes = l.max_leaves = 4;
      l.max_depth = 2;
      l.max_rank = 2;
      l.max_chunk_bytes = 64;
      l.max_string_bytes = 4;
      l.max_leaf_bytes = l.max_total_bytes = 256;
      break;
    case 3:
      l.max_leaf_bytes = 1 << 16;
      l.max_total_bytes = 1 << 18;
      break;
    default: break;
  }
  return l;
}

/// Recomputes every hash of a jtree-shaped buffer in place, as far as its structure allows:
/// chunk checksums (when `chunks` and the index decodes), the index and header hashes in the
/// footer, the generation-0 header hash in the preamble, the footer, commit slot and preamble
/// hashes. A mutation then reaches the semantic checks instead of stopping at a checksum: the
/// model is a hostile writer who computes hashes. Ranges outside the buffer are left alone.
inline void rehash(std::vector<std::byte>& f, bool chunks) {
  const uint64_t n = f.size();
  if (n < format::kPreambleSize + format::kFooterSize) return;
  std::byte* foot = f.data() + n - format::kFooterSize;
  auto in_file = [&](uint64_t off, uint64_t size) { return off <= n && size <= n - off; };
  const uint64_t index_off = load_le<uint64_t>(foot + 0), index_size = load_le<uint64_t>(foot + 8);
  const uint64_t header_off = load_le<uint64_t>(foot + 24);
  const uint64_t header_size = load_le<uint64_t>(foot + 32);
  if (chunks && in_file(index_off, index_size) && index_size > 0) {
    std::span<std::byte> index(f.data() + index_off, index_size);
    auto decoded = format::decode_index(index, Limits{});
    if (decoded.ok()) {
      // The chunk table is a vector of 32-byte structs inside the flatbuffer: find it by
      // content (the decoded records, in order) and patch each checksum where it lies.
      const auto& recs = decoded->chunks;
      const size_t table = recs.size() * sizeof(format::ChunkRecord);
      for (size_t at = 0; table > 0 && at + table <= index.size(); at += 4) {
        if (std::memcmp(index.data() + at, recs.data(), table) != 0) continue;
        for (size_t i = 0; i < recs.size(); ++i) {
          const format::ChunkRecord& c = recs[i];
          if (c.segment >= decoded->segments.size()) continue;
          const SegmentSpan& seg = decoded->segments[c.segment];
          const uint64_t pos = seg.file_offset + c.offset;
          if (pos < seg.file_offset || !in_file(pos, c.stored_size)) continue;
          const uint64_t sum = xxh3({f.data() + pos, c.stored_size},
                                    chunk_seed(seg.salt, c.offset));
          store_le<uint64_t>(index.data() + at + i * sizeof(format::ChunkRecord) + 16, sum);
        }
        break;
      }
    }
  }
  if (in_file(index_off, index_size)) {
    store_le<uint64_t>(foot + 16, xxh3({f.data() + index_off, index_size}));
  }
  if (in_file(header_off, header_size)) {
    store_le<uint64_t>(foot + 40, xxh3({f.data() + header_off, header_size}));
  }
  const uint64_t pre_size = load_le<uint64_t>(f.data() + 40);
  if (in_file(format::kPreambleSize, pre_size)) {
    store_le<uint64_t>(f.data() + 48, xxh3({f.data() + format::kPreambleSize, pre_size}));
  }
  store_le<uint64_t>(foot + 112, xxh3({foot, 112}));
  for (size_t slot : format::kSlotOffset) {
    std::byte* s = f.data() + slot;
    bool empty = true;
    for (size_t i = 0; i < format::kSlotSize; ++i) empty &= s[i] == std::byte{0};
    if (!empty) store_le<uint64_t>(s + 24, xxh3({s, 24}));
  }
  store_le<uint64_t>(f.data() + 56, xxh3({f.data(), 56}));
}

/// A Sink into memory: what save() writes, for a read back without touching the disk.
class MemorySink final : public Sink {
 public:
  const std::string& name() const override { return name_; }
  uint64_t position() const override { return bytes_.size(); }
  Status append(std::span<const std::byte> data) override {
    if (closed_) return Status::invalid_argument("memory sink: closed");
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    return Status::success();
  }
  Status sync() override { return Status::success(); }
  Status commit() override {
    if (closed_) return Status::invalid_argument("memory sink: closed");
    closed_ = committed_ = true;
    return Status::success();
  }
  void abort() noexcept override { closed_ = true; }
  IoStats stats() const override { return {}; }

  bool committed() const { return committed_; }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::string name_ = "<fuzz sink>";
  std::vector<std::byte> bytes_;
  bool closed_ = false, committed_ = false;
};

/// memcmp that accepts empty (possibly null) ranges.
inline bool same_bytes(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

/// Status codes a reader may answer a hostile file with.
inline bool is_refusal(const Status& st) {
  switch (st.code()) {
    case StatusCode::kCorruption:
    case StatusCode::kNotSupported:
    case StatusCode::kResourceExhausted:
    case StatusCode::kNotFound:  // absent chunks of segment files
      return true;
    default: return false;
  }
}

/// A small deterministic generator for slices and choices (no global state).
struct Rng {
  uint64_t s;
  uint64_t next() {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
};

}  // namespace jtree::fuzz
