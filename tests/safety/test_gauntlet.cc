// The corruption gauntlet (issue "Safe on hostile input"): small valid files of several shapes,
// damaged one byte at a time and cut at every length. Each damaged file must read exactly as
// the format says it must: a precise error, or — where the damaged byte is one no current
// structure uses, or the file says how to recover — the right data, bit-exact. Never a crash,
// a hang, a sanitizer report or silently wrong data.
//
// Three kinds of damage:
//  - every value of every metadata byte (preamble, commit slots, header, index, footer), and a
//    sample of chunk bytes and of padding / dead bytes: each outcome is predicted exactly;
//  - the same changes to the hashed metadata with its hashes recomputed (a forged file): what
//    stops them is validation, so the outcome is "a clean error, or a file that reads
//    consistently": any leaf whose spec and chunk entries are unchanged reads bit-exact;
//  - truncation at every length, and garbage after the end.
//
// JTREE_GAUNTLET_FULL=1 forges every value of every byte instead of a sample (slow).
#include <cstdlib>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "expect.h"
#include "file_map.h"
#include "format/layout.h"
#include "sample_files.h"
#include "snapshot.h"

using namespace jtree;
using namespace jtree::safety;

namespace {

const std::vector<SampleFile>& files() {
  static const std::vector<SampleFile> f = sample_files();
  return f;
}

struct Subject {
  const SampleFile& file;
  std::string name;  // the memory source's name, which every error must start with
  Snapshot ref;      // the intact file
  Snapshot previous; // appended files: generation 0, recovered through a commit slot
  FileMap map;
};

Subject subject(const SampleFile& f) {
  Subject s{f, "mem:" + f.name, {}, {}, {}};
  auto r = Reader::open(memory_source(f.bytes, s.name));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  s.ref = snapshot(**r, single_thread());
  s.map = map_file(**r, f.bytes);
  for (const LeafSnapshot& l : s.ref.leaves) REQUIRE_MESSAGE(l.status.ok(), l.status.to_string());
  if (!f.previous.empty()) {
    s.previous = snapshot(f.previous, s.name, single_thread());
    REQUIRE(s.previous.status.ok());
    s.previous.recovered = true;
  }
  return s;
}

// What changing a byte at `p` (without fixing hashes) must give.
Snapshot expected_after_change(const Subject& s, uint64_t p) {
  const FileMap::Chunk* chunk = nullptr;
  switch (s.map.region(p, &chunk)) {
    case Region::kPreamble:
      return failure(StatusCode::kCorruption, p < 8 ? "not a jtree file" : "preamble checksum");
    case Region::kSlots:
      // Not covered by the preamble hash: a changed slot fails its own hash and is ignored
      // (section 3.1), and the valid footer at the end does not need the slots anyway.
      return s.ref;
    case Region::kHeader: return failure(StatusCode::kCorruption, "header checksum mismatch");
    case Region::kIndex: return failure(StatusCode::kCorruption, "index checksum mismatch");
    case Region::kFooter:
      // A footer that fails its magic or hash is the torn end of an interrupted append
      // (section 5, step 4): a commit slot leads to the previous committed generation, the
      // reader says it recovered. Without such a generation, the file is damaged.
      if (s.file.previous.empty()) {
        return failure(StatusCode::kCorruption, p >= s.map.footer_offset + 120
                                                    ? "no jtree footer at the end of the file"
                                                    : "footer checksum mismatch");
      }
      return s.previous;
    case Region::kChunk: {
      Snapshot want = s.ref;
      want.leaves[chunk->leaf].status = Status::corruption("checksum mismatch");
      want.leaves[chunk->leaf].data.clear();
      return want;
    }
    case Region::kOther:
      // Alignment padding, and in later generations the dead bytes of earlier ones: no
      // structure of the current generation covers them.
      return s.ref;
  }
  return {};
}

std::string where(const Subject& s, uint64_t p, int value) {
  return s.file.name + " byte " + std::to_string(p) + " (" + region_name(s.map.region(p)) +
         ") = " + std::to_string(value);
}

std::vector<std::byte> changed(const std::vector<std::byte>& bytes, uint64_t p, int value) {
  std::vector<std::byte> out = bytes;
  out[p] = static_cast<std::byte>(value);
  return out;
}

// Every metadata position: the preamble with its slots, header, index and footer.
std::vector<uint64_t> metadata_positions(const FileMap& m) {
  std::vector<uint64_t> out;
  auto add = [&](uint64_t from, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) out.push_back(from + i);
  };
  add(0, format::kPreambleSize);
  add(m.header_offset, m.header_size);
  add(m.index_offset, m.index_size);
  add(m.footer_offset, format::kFooterSize);
  return out;
}

// Every chunk's first 8 bytes (a plane table), its last, and 8 more spread over it; and every
// byte in no chunk and no metadata (padding, dead bytes), up to 64 of each gap.
std::vector<uint64_t> data_positions(const FileMap& m) {
  std::vector<uint64_t> out;
  for (const FileMap::Chunk& c : m.chunks) {
    for (uint64_t i = 0; i < std::min<uint64_t>(8, c.size); ++i) out.push_back(c.offset + i);
    for (uint64_t k = 1; k <= 8; ++k) out.push_back(c.offset + (c.size - 1) * k / 8);
  }
  uint64_t run = 0;
  for (uint64_t p = format::kPreambleSize; p < m.size; ++p) {
    if (m.region(p) != Region::kOther) {
      run = 0;
    } else if (run++ < 64) {
      out.push_back(p);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("every value of every metadata byte gives the exact outcome the format prescribes") {
  for (const SampleFile& f : files()) {
    const Subject s = subject(f);
    Tally tally("metadata bytes of " + f.name);
    for (uint64_t p : metadata_positions(s.map)) {
      const Snapshot want = expected_after_change(s, p);
      const int orig = static_cast<int>(f.bytes[p]);
      for (int v = 0; v < 256; ++v) {
        if (v == orig) continue;
        const Snapshot got = snapshot(changed(f.bytes, p, v), s.name, single_thread());
        tally.record(difference(got, want, s.name), where(s, p, v));
      }
    }
    CHECK(tally.cases() > 255 * 300);
  }
}

TEST_CASE("changed chunk bytes fail their leaf's checksum; padding and dead bytes are ignored") {
  for (const SampleFile& f : files()) {
    const Subject s = subject(f);
    Tally tally("data bytes of " + f.name);
    uint64_t padding = 0;
    for (uint64_t p : data_positions(s.map)) {
      const Snapshot want = expected_after_change(s, p);
      const int orig = static_cast<int>(f.bytes[p]);
      for (int v : {orig ^ 0x01, orig ^ 0xff}) {
        auto bytes = changed(f.bytes, p, v);
        auto r = Reader::open(memory_source(bytes, s.name));
        if (!r.ok()) {
          tally.record("open failed: " + r.status().to_string(), where(s, p, v));
          continue;
        }
        tally.record(difference(snapshot(**r, single_thread()), want, s.name), where(s, p, v));
        const FileMap::Chunk* chunk = nullptr;
        if (s.map.region(p, &chunk) == Region::kChunk) {
          // Without checksums the decoders meet the damage: a clean error or some data, and
          // a raw chunk is copied as it is.
          ReadOptions unchecked = single_thread();
          unchecked.verify_checksums = false;
          const Leaf& l = (*r)->tree().leaves[chunk->leaf];
          std::vector<std::byte> out(l.memory_bytes());
          const Status st = (*r)->read(chunk->leaf, out, unchecked);
          const bool clean = st.ok() || (!chunk->raw && st.is_corruption());
          tally.record(clean ? "" : "unchecked read: " + st.to_string(), where(s, p, v));
        } else if (s.map.generation == 0) {
          // A generation-0 file has no dead bytes: its gaps are zero padding, which verify
          // checks (section 12).
          ++padding;
          auto rep = (*r)->verify(single_thread());
          tally.record(rep.ok() && !rep->ok() ? "" : "verify missed changed padding",
                       where(s, p, v));
        }
      }
    }
    CHECK(tally.cases() >= 2 * s.map.chunks.size());
    if (f.name == "raw") CHECK(padding > 0);  // raw chunks are aligned: there is padding
  }
}

TEST_CASE("forged metadata (hashes recomputed) gives a clean error or a consistent file") {
  const bool full = std::getenv("JTREE_GAUNTLET_FULL") != nullptr;
  for (const SampleFile& f : files()) {
    const Subject s = subject(f);
    Tally tally("forged metadata of " + f.name);
    uint64_t opened = 0, refused = 0;
    for (uint64_t p : metadata_positions(s.map)) {
      const Region region = s.map.region(p);
      // The slots are unhashed (covered by the first test); a forged hash field would just be
      // recomputed.
      if (region == Region::kSlots || (p >= 56 && p < 64) ||
          (p >= s.map.footer_offset + 112 && p < s.map.footer_offset + 120)) {
        continue;
      }
      const int orig = static_cast<int>(f.bytes[p]);
      std::vector<int> values;
      if (full) {
        for (int v = 0; v < 256; ++v) values.push_back(v);
      } else {
        values = {orig ^ 0x01, orig ^ 0x02, orig ^ 0x80, 0x00, 0xff, (orig + 1) & 0xff,
                  (orig + 0xff) & 0xff, 0x7f};
      }
      for (int v : values) {
        if (v == orig) continue;
        auto bytes = changed(f.bytes, p, v);
        rehash(bytes, s.map, region);
        const Snapshot got = snapshot(std::move(bytes), s.name, single_thread());
        std::string problem;
        const StatusCode c = got.status.code();
        if (!got.status.ok()) {
          ++refused;
          if (c != StatusCode::kCorruption && c != StatusCode::kNotSupported &&
              c != StatusCode::kResourceExhausted) {
            problem = "unexpected code: " + got.status.to_string();
          } else if (got.status.message().rfind(s.name + ": ", 0) != 0 ||
                     got.status.message().size() < s.name.size() + 10) {
            problem = "imprecise message: " + got.status.message();
          }
        } else {
          ++opened;
          // What the forged file says may differ, but a leaf it still describes the same way
          // (spec, inline bytes, chunk entries) must read exactly as before.
          for (size_t i = 0; i < got.leaves.size() && problem.empty(); ++i) {
            const LeafSnapshot& g = got.leaves[i];
            const StatusCode lc = g.status.code();
            if (!g.status.ok() && lc != StatusCode::kCorruption && lc != StatusCode::kNotFound &&
                lc != StatusCode::kResourceExhausted) {
              problem = "leaf " + std::to_string(i) + ": unexpected " + g.status.to_string();
            }
            if (i < s.ref.leaves.size() && g.spec == s.ref.leaves[i].spec &&
                g.location == s.ref.leaves[i].location &&
                (!g.status.ok() || g.data != s.ref.leaves[i].data)) {
              problem = "leaf " + std::to_string(i) + ": same spec and chunks, " +
                        (g.status.ok() ? "WRONG DATA" : g.status.to_string());
            }
          }
        }
        tally.record(problem, where(s, p, v));
      }
    }
    // Both outcomes occur: forging is not all-or-nothing (padding and unused flatbuffer bytes
    // change nothing; most bytes change something validation catches).
    CHECK(refused > 0);
    MESSAGE(f.name << ": " << opened << " forged files opened, " << refused << " refused");
  }
}

TEST_CASE("a file cut at any length is refused, or read at its last complete generation") {
  for (const SampleFile& f : files()) {
    const Subject s = subject(f);
    Tally tally("truncations of " + f.name);
    for (uint64_t len = 0; len < f.bytes.size(); ++len) {
      Snapshot want = failure(StatusCode::kCorruption, "");
      if (!f.previous.empty() && len >= f.previous.size()) {
        // Cut inside the appended generation: what is left is generation 0, whole; beyond
        // its end, the slot that the append wrote first (section 10.2) finds it.
        want = s.previous;
        want.recovered = len > f.previous.size();
      }
      std::vector<std::byte> bytes(f.bytes.begin(), f.bytes.begin() + static_cast<long>(len));
      tally.record(difference(snapshot(std::move(bytes), s.name, single_thread()), want, s.name),
                   s.file.name + " cut to " + std::to_string(len));
    }
  }
}

TEST_CASE("bytes after the end are an interrupted append: ignored only if a slot says so") {
  for (const SampleFile& f : files()) {
    const Subject s = subject(f);
    Tally tally("extensions of " + f.name);
    // Appended files recorded their current footer in a commit slot; files written once did
    // not (section 3.1), so for them a torn end cannot be told from damage.
    Snapshot want = failure(StatusCode::kCorruption, "");
    if (s.map.has_current_slot) {
      want = s.ref;
      want.recovered = true;
    }
    CHECK(s.map.has_current_slot == !f.previous.empty());
    for (uint64_t extra : {1, 7, 8, 100, 127, 128, 129, 4096}) {
      for (int fill : {0x00, 0x5a}) {
        auto bytes = f.bytes;
        bytes.resize(bytes.size() + extra, static_cast<std::byte>(fill));
        tally.record(difference(snapshot(std::move(bytes), s.name, single_thread()), want, s.name),
                     f.name + " + " + std::to_string(extra) + " bytes");
      }
    }
    // A copy of the footer after garbage is a valid footer at the end, over structures it does
    // not describe in that place: still refused or read exactly, never misread.
    auto bytes = f.bytes;
    bytes.insert(bytes.end() - format::kFooterSize, 64, std::byte{0});
    const Snapshot got = snapshot(std::move(bytes), s.name, single_thread());
    tally.record(got.status.ok() ? difference(got, s.ref, s.name) : "",
                 f.name + " with 64 bytes before its footer");
  }
}
