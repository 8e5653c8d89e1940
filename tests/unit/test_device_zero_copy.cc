// Zero copy (DeviceOptions::zero_copy): raw chunks copied to the device straight from the
// file's registered page-cache pages, through the host stand-in engine (which records every
// registration, and counts a copy from memory neither pinned nor registered as a misuse): no
// GPU needed. Bytes identical to a staged load; which pieces go which way (DeviceStats);
// no staging buffer pinned for a load of raw whole chunks; registered memory bounded by
// staging_bytes and all of it released however the load ends (success, a damaged chunk, a
// registration refused mid-load, cancellation); Auto's choices (a cold file, no mapping, an
// engine that cannot register) and On's errors; the batch plan.
#include <algorithm>
#include <random>

#include <doctest/doctest.h>

#include "cuda/staging_plan.h"
#include "jtree/device.h"
#include "raw_chunk_files.h"
#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;
using namespace jtree::testing::raw_files;
using jtree::staging::HostCopyEngine;

namespace {

// The parts of Load (raw_chunk_files.h) that are runs of whole raw chunks, the ones zero copy
// serves: whole "rows", "odd", "slabs", "odd_rows", rows 128..512, slabs 2..5, one chunk of
// "odd" (the others: compressed, tiles, empty, a slice that cuts chunks).
constexpr size_t kZeroCopyParts[] = {0, 1, 2, 3, 7, 8, 10};

uint64_t zero_copy_part_bytes(const Load& l) {
  uint64_t n = 0;
  for (size_t i : kZeroCopyParts) n += l.want[i].size();
  return n;
}

DeviceOptions zero_copy_options(ZeroCopy mode = ZeroCopy::kOn) {
  DeviceOptions o;
  o.staging_bytes = 4 << 20;  // 4 buffers of 1 MiB: every chunk fits one
  o.staging_buffers = 4;
  o.zero_copy = mode;
  return o;
}

// Loads `l` from `reader` through `engine` with zero_copy `mode`; the load must succeed and
// give the right bytes. Its stats.
DeviceStats load_ok(const Reader& reader, Load& l, ZeroCopy mode, HostCopyEngine& engine) {
  DeviceStats stats;
  DeviceOptions o = zero_copy_options(mode);
  o.stats = &stats;
  Status st = read_many_staged(reader, l.reqs, engine, o);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  l.check();
  check_clean(engine, o.staging_bytes);
  return stats;
}

// Nothing registered any more, every registration ended once, never more than
// staging_bytes registered at once (each slot holds one window of whole pages).
void check_registrations(const HostCopyEngine& e, uint64_t staging_bytes) {
  const auto s = e.stats();
  CHECK(s.registered_bytes == 0);
  CHECK(s.registrations == s.unregistrations);
  CHECK(s.peak_registered_bytes <= staging_bytes);
}

// A ZeroCopy::kAuto load of `f` with `o` whose registration `fail_at` the engine refuses (call
// 0 is the probe): it succeeds, right bytes, some of them zero-copied and the rest staged, and
// says so; nothing stays registered.
void check_auto_refused_mid_load(File& f, DeviceOptions o, int fail_at) {
  HostCopyEngine::Options eo;
  eo.fail_register_at = fail_at;
  Load l(f);
  DeviceStats stats;
  o.stats = &stats;
  HostCopyEngine engine(eo);
  Status st = read_many_staged(*f.reader, l.reqs, engine, o);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  l.check();
  check_clean(engine, o.staging_bytes);
  check_registrations(engine, o.staging_bytes);
  CHECK(stats.zero_copy_bytes > 0);
  CHECK(stats.zero_copy_bytes < zero_copy_part_bytes(l));
  CHECK(stats.zero_copy_bytes + stats.buffered_bytes == l.total);
  CHECK(stats.zero_copy_note.find("zero copy stopped mid-load") != std::string::npos);
  CHECK(stats.zero_copy_note.find("injected failure of registration " +
                                  std::to_string(fail_at)) != std::string::npos);
}

}  // namespace

TEST_CASE("zero copy: bytes identical to a staged load, raw runs from the mapping, no staging") {
  TempDir dir;
  File f(dir.path(), 64);
  for (bool verify : {true, false}) {
    CAPTURE(verify);
    Load l(f);
    DeviceStats stats;
    DeviceOptions o = zero_copy_options();
    o.read.verify_checksums = verify;
    o.stats = &stats;
    HostCopyEngine engine;
    Status st = read_many_staged(*f.reader, l.reqs, engine, o);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    l.check();
    check_clean(engine, o.staging_bytes);  // (misuses 0: every copy from pinned or registered)
    check_registrations(engine, o.staging_bytes);
    CHECK(stats.zero_copy_bytes == zero_copy_part_bytes(l));
    CHECK(stats.buffered_bytes == l.total - stats.zero_copy_bytes);
    CHECK(stats.direct_bytes == 0);
    CHECK(stats.zero_copy_note.empty());
    CHECK(stats.direct_io_note.find("zero copy serves the raw chunks") != std::string::npos);
    CHECK(engine.stats().registrations > 1);  // (the probe, and the batches)
  }

  // Only whole raw leaves: nothing is staged, so nothing is pinned at all.
  Load all(f);
  std::vector<DeviceRequest> raw;
  uint64_t raw_bytes = 0;
  for (size_t i : {0, 1, 2}) {
    raw.push_back(all.reqs[i]);
    raw_bytes += all.want[i].size();
  }
  DeviceStats stats;
  DeviceOptions o = zero_copy_options();
  o.stats = &stats;
  HostCopyEngine engine;
  REQUIRE(read_many_staged(*f.reader, raw, engine, o).ok());
  for (size_t i : {0, 1, 2}) CHECK(all.dests[i] == all.want[i]);
  CHECK(stats.zero_copy_bytes == raw_bytes);
  CHECK(stats.buffered_bytes == 0);
  CHECK(engine.stats().allocations == 0);
  CHECK(engine.stats().bytes_copied == raw_bytes);
  check_registrations(engine, o.staging_bytes);
}

TEST_CASE("zero copy: chunks larger than a staging buffer are served whole, in parts") {
  // 4 buffers of 16 KiB: the chunks of "rows" (128 KiB), "slabs" (40 KiB) and "odd" (40,009
  // B) are larger than a buffer; each is still copied from the mapping, over several windows,
  // and verified whole. (Staged instead, they would be cut to the buffer.)
  TempDir dir;
  File f(dir.path(), 64);
  read_into_cache(f.path);
  auto small = [](ZeroCopy mode) {
    DeviceOptions o = zero_copy_options(mode);
    o.staging_bytes = 64 << 10;
    return o;
  };
  for (bool verify : {true, false}) {
    CAPTURE(verify);
    Load l(f);
    DeviceStats stats;
    DeviceOptions o = small(ZeroCopy::kOn);
    o.read.verify_checksums = verify;
    o.stats = &stats;
    HostCopyEngine engine;
    Status st = read_many_staged(*f.reader, l.reqs, engine, o);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    l.check();  // (and the slice that cuts chunks, staged in buffer-sized pieces)
    check_clean(engine, o.staging_bytes);
    check_registrations(engine, o.staging_bytes);
    CHECK(stats.zero_copy_bytes == zero_copy_part_bytes(l));
    CHECK(stats.buffered_bytes == l.total - stats.zero_copy_bytes);
  }
  SUBCASE("a damaged large chunk is Corruption") {
    const Leaf& leaf = f.reader->leaf(f.leaf("rows"));
    const ChunkInfo c = f.reader->chunk(leaf.first_chunk + 3);
    auto bytes = read_file(f.path);
    bytes[c.file_offset + c.stored_size - 5] ^= std::byte{0x01};  // (its last window)
    write_file(f.path, bytes);
    f.reopen();
    Load l(f);
    HostCopyEngine engine;
    DeviceOptions o = small(ZeroCopy::kOn);
    Status st = read_many_staged(*f.reader, l.reqs, engine, o);
    REQUIRE(st.code() == StatusCode::kCorruption);
    CHECK(st.message().find("leaf rows: chunk 3: checksum mismatch") != std::string::npos);
    check_clean(engine, o.staging_bytes);
    check_registrations(engine, o.staging_bytes);
  }
  SUBCASE("a registration refused mid-load: the rest staged through a buffer, in steps") {
    check_auto_refused_mid_load(f, small(ZeroCopy::kAuto), 3);
  }
}

TEST_CASE("zero copy: a damaged raw chunk is Corruption naming the key, nothing stays registered") {
  TempDir dir;
  File f(dir.path(), 64);
  const Leaf& l = f.reader->leaf(f.leaf("rows"));
  const ChunkInfo c = f.reader->chunk(l.first_chunk + 5);
  auto bytes = read_file(f.path);
  bytes[c.file_offset + 77] ^= std::byte{0x10};
  write_file(f.path, bytes);
  f.reopen();
  Load load(f);
  HostCopyEngine engine;
  DeviceOptions o = zero_copy_options();
  Status st = read_many_staged(*f.reader, load.reqs, engine, o);
  REQUIRE(st.code() == StatusCode::kCorruption);
  CHECK(st.message().find("leaf rows: chunk 5: checksum mismatch") != std::string::npos);
  CHECK(st.message().find(f.path) != std::string::npos);
  check_clean(engine, o.staging_bytes);
  check_registrations(engine, o.staging_bytes);
  // Unverified, the damage is not looked for (as for every unverified read).
  o.read.verify_checksums = false;
  HostCopyEngine quiet;
  CHECK(read_many_staged(*f.reader, load.reqs, quiet, o).ok());
}

TEST_CASE("zero copy refused by the engine: Auto stages everything and says why, On fails") {
  TempDir dir;
  File f(dir.path(), 64);
  read_into_cache(f.path);
  HostCopyEngine::Options eo;
  eo.can_register = false;
  {
    Load l(f);
    DeviceStats stats;
    DeviceOptions o = zero_copy_options(ZeroCopy::kAuto);
    o.stats = &stats;
    HostCopyEngine engine(eo);
    REQUIRE(read_many_staged(*f.reader, l.reqs, engine, o).ok());
    l.check();
    check_clean(engine, o.staging_bytes);
    CHECK(stats.zero_copy_bytes == 0);
    CHECK(stats.zero_copy_note.find("cannot register host memory") != std::string::npos);
  }
  {
    Load l(f);
    DeviceOptions o = zero_copy_options(ZeroCopy::kOn);
    HostCopyEngine engine(eo);
    Status st = read_many_staged(*f.reader, l.reqs, engine, o);
    REQUIRE(st.is_not_supported());
    CHECK(st.message().find(f.path + ": zero_copy is On, but it cannot be used") !=
          std::string::npos);
    CHECK(engine.stats().copies_issued == 0);
    check_clean(engine, o.staging_bytes);
  }
}

TEST_CASE("zero copy: a registration refused mid-load: Auto stages the rest, On fails cleanly") {
  TempDir dir;
  File f(dir.path(), 64);
  read_into_cache(f.path);
  // (Call 0 is the probe; the file has 3 windows of raw chunks.)
  check_auto_refused_mid_load(f, zero_copy_options(ZeroCopy::kAuto), 2);
  HostCopyEngine::Options eo;
  eo.fail_register_at = 2;
  {
    Load l(f);
    DeviceOptions o = zero_copy_options(ZeroCopy::kOn);
    HostCopyEngine engine(eo);
    Status st = read_many_staged(*f.reader, l.reqs, engine, o);
    REQUIRE(st.code() == StatusCode::kIOError);
    CHECK(st.message().find(f.path + ": zero copy: registering file bytes [") !=
          std::string::npos);
    check_clean(engine, o.staging_bytes);
    check_registrations(engine, o.staging_bytes);
  }
}

TEST_CASE("zero copy Auto: a warm file from its pages, a cold one with O_DIRECT") {
  const auto disk = disk_dir();
  if (!disk) return;
  SubDir dir(*disk);
  File f(dir.path, 64);
  read_into_cache(f.path);
  REQUIRE(cached(f) >= 0.5);
  {
    Load l(f);
    HostCopyEngine engine;
    const DeviceStats stats = load_ok(*f.reader, l, ZeroCopy::kAuto, engine);
    CHECK(stats.zero_copy_bytes == zero_copy_part_bytes(l));
    CHECK(stats.direct_bytes == 0);
  }
  // (The page cache keeps pages while a mapping of them exists, the reader's own included:
  // the file is evicted with no reader open.)
  f.reader.reset();
  evict(f.path);
  f.reopen();
  if (cached(f) >= 0.5) {
    MESSAGE("!!!! " << f.path << " stays in the page cache after POSIX_FADV_DONTNEED: the "
                    "cold case of zero copy Auto is NOT tested");
    if (require_all()) FAIL("JTREE_TEST_REQUIRE_ALL=1 and the file cannot be evicted");
    return;
  }
  Load l(f);
  HostCopyEngine engine;
  const DeviceStats stats = load_ok(*f.reader, l, ZeroCopy::kAuto, engine);
  CHECK(stats.zero_copy_bytes == 0);
  CHECK(stats.zero_copy_note.find("not in the page cache") != std::string::npos);
  CHECK(stats.direct_bytes > 0);  // (O_DIRECT, Auto, took the cold file)
  CHECK(engine.stats().registrations == 0);
}

TEST_CASE("zero copy: a local file, mapped or not by the reader; not a memory source") {
  TempDir dir;
  File f(dir.path(), 64);
  // The reader's own mapping is not what zero copy uses: a reader without one works too.
  OpenOptions oo;
  oo.use_mmap = false;
  auto unmapped = *Reader::open(f.path, oo);
  {
    Load l(f);
    HostCopyEngine engine;
    CHECK(load_ok(*unmapped, l, ZeroCopy::kOn, engine).zero_copy_bytes ==
          zero_copy_part_bytes(l));
  }
  auto in_memory = *Reader::open(memory_source(read_file(f.path), "mem.jtree"));
  {
    Load l(f);
    HostCopyEngine engine;
    const DeviceStats stats = load_ok(*in_memory, l, ZeroCopy::kAuto, engine);
    CHECK(stats.zero_copy_bytes == 0);
    CHECK(stats.zero_copy_note.find("not a local file") != std::string::npos);
    CHECK(engine.stats().registrations == 0);
  }
  {
    Load l(f);
    DeviceOptions o = zero_copy_options(ZeroCopy::kOn);
    HostCopyEngine engine;
    Status st = read_many_staged(*in_memory, l.reqs, engine, o);
    REQUIRE(st.is_not_supported());
    CHECK(st.message().find("mem.jtree: zero_copy is On, but it cannot be used: not a local "
                            "file") != std::string::npos);
  }
}

TEST_CASE("zero copy options: names, checks, and the default") {
  DeviceOptions both = zero_copy_options(ZeroCopy::kOn);
  both.direct_io = DirectIo::kOn;
  Status st = both.check();
  REQUIRE(st.is_invalid_argument());
  CHECK(st.message().find("zero_copy and direct_io are both on") != std::string::npos);
  DeviceOptions bad;
  bad.zero_copy = static_cast<ZeroCopy>(7);
  CHECK(bad.check().message().find("zero_copy is 7") != std::string::npos);
  for (ZeroCopy m : {ZeroCopy::kAuto, ZeroCopy::kOn, ZeroCopy::kOff}) {
    CHECK(*parse_zero_copy(zero_copy_name(m)) == m);
  }
  CHECK(parse_zero_copy("On").status().message().find("not \"On\"") != std::string::npos);
  CHECK(DeviceOptions{}.zero_copy == ZeroCopy::kOff);  // (experimental: off by default)
}

TEST_CASE("zero copy: cancellation stops the load, nothing stays registered") {
  TempDir dir;
  File f(dir.path(), 64);
  Load l(f);
  HostCopyEngine::Options eo;
  eo.copy_delay_us = 300;
  HostCopyEngine engine(eo);
  DeviceOptions o = zero_copy_options();
  o.staging_bytes = 256 << 10;  // small windows: many batches
  int calls = 0;
  o.read.progress = [&](uint64_t, uint64_t) { return ++calls < 3; };
  Status st = read_many_staged(*f.reader, l.reqs, engine, o);
  REQUIRE(st.code() == StatusCode::kAborted);
  CHECK(calls == 3);
  check_clean(engine, o.staging_bytes);
  check_registrations(engine, o.staging_bytes);
}

TEST_CASE("zero copy plan: one batch per window, disjoint page ranges, every byte once") {
  using staging::Batch;
  using staging::kNoFileRun;
  using staging::Piece;
  std::mt19937 g(5);
  for (int trial = 0; trial < 300; ++trial) {
    CAPTURE(trial);
    const uint64_t page = 4096, window = (page << (g() % 5)) + g() % 3 * 1000;
    const uint64_t whole_window = std::max(page, window / page * page);
    std::vector<Piece> pieces;
    std::vector<uint64_t> offsets;
    uint64_t at = g() % 5000;
    const size_t n = 1 + g() % 40;
    for (size_t i = 0; i < n; ++i) {
      Piece p;
      p.request = static_cast<uint32_t>(i);
      p.bytes = 1 + g() % (2 * window + 3000);
      p.dst_offset = g() % 100;
      pieces.push_back(p);
      offsets.push_back(g() % 4 == 0 ? kNoFileRun : at);
      at += p.bytes + (g() % 3 == 0 ? g() % 9000 : 0);
    }
    if (g() % 2) {  // (pieces out of file order, as a load may ask for them)
      std::vector<size_t> order(n);
      for (size_t i = 0; i < n; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), g);
      std::vector<Piece> p2;
      std::vector<uint64_t> o2;
      for (size_t i : order) {
        p2.push_back(pieces[i]);
        o2.push_back(offsets[i]);
      }
      pieces = p2;
      offsets = o2;
    }
    const uint64_t file_size = at + g() % 100;
    const uint64_t last_page = (file_size + page - 1) / page * page;
    const std::vector<Batch> batches =
        staging::pack_pieces_mapped(pieces, offsets, window, window, page, file_size);
    std::vector<uint64_t> covered(n, 0), verified(n, 0);
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    std::vector<size_t> staged;
    bool staged_seen = false;
    for (const Batch& b : batches) {
      if (!b.mapped) {
        staged_seen = true;
        for (size_t i = b.first; i < b.last; ++i) staged.push_back(i);
        continue;
      }
      CHECK(!staged_seen);  // (the mapped batches first, in file order)
      CHECK(b.map_begin % page == 0);
      CHECK((b.map_end % page == 0 || b.map_end == last_page));
      CHECK(b.map_end <= last_page);
      CHECK(b.map_end - b.map_begin <= whole_window);
      CHECK(b.offsets.empty());
      ranges.push_back({b.map_begin, b.map_end});
      uint64_t bytes = 0;
      for (const staging::MappedPart& part : b.parts) {
        REQUIRE(offsets[part.piece] != kNoFileRun);
        // Contiguous in the piece and in the file: part k of a piece follows part k-1.
        CHECK(part.dst_offset == covered[part.piece]);
        CHECK(part.file_offset == offsets[part.piece] + part.dst_offset);
        CHECK(b.map_begin <= part.file_offset);
        CHECK(part.file_offset + part.bytes <= b.map_end);
        covered[part.piece] += part.bytes;
        bytes += part.bytes;
      }
      CHECK(b.bytes == bytes);
      for (size_t p : b.verified) ++verified[p];
    }
    for (size_t i = 1; i < ranges.size(); ++i) CHECK(ranges[i - 1].second <= ranges[i].first);
    std::sort(staged.begin(), staged.end());
    size_t s = 0;
    for (size_t i = 0; i < n; ++i) {
      CAPTURE(i);
      if (offsets[i] == kNoFileRun) {
        REQUIRE(s < staged.size());
        CHECK(staged[s++] == i);  // every staged piece in one batch
        continue;
      }
      CHECK(covered[i] == pieces[i].bytes);  // every byte once
      CHECK(verified[i] == 1);               // its chunks checked once
    }
    CHECK(s == staged.size());
  }
}
