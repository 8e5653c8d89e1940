// The device-load pipeline (jtree/device.h) through the host-memory copy engine: no GPU needed.
// Bit-exact data for raw and compressed leaves and boxes, pieces in destination order,
// backpressure (pinned memory and queued copies never above the bound, however slow the
// copies), failures in the middle of a load (clear error, every buffer and stream freed, no
// copy issued after it, no hang), cancellation, bad requests.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>

#include <doctest/doctest.h>

#include "cuda/host_copy_engine.h"
#include "cuda/pinned_cache.h"
#include "cuda/staging_plan.h"
#include "jtree/device.h"
#include "test_util.h"
#include "util/box_copy.h"
#include "util/populated_memory.h"

using namespace jtree;
using namespace jtree::testing;
using jtree::staging::HostCopyEngine;

namespace {

struct Spec {
  std::string key;
  DType dtype;
  Shape shape;
  Shape chunk;
  Codec codec;
};

// Leaves of every kind the pipeline meets: raw and compressed, chunked along one or several
// dimensions, 4-bit, 0-d, empty, inline.
const std::vector<Spec>& specs() {
  static const std::vector<Spec> s = {
      {"raw_rows", DType::kFloat32, {300, 64}, {37, 64}, Codec::kRaw},
      {"zstd_tiles", DType::kBFloat16, {97, 55}, {10, 8}, Codec::kZstd},
      {"raw_tiles", DType::kInt64, {40, 30, 7}, {7, 30, 2}, Codec::kRaw},
      {"int4", DType::kInt4, {45, 31}, {8, 7}, Codec::kZstd},
      {"complex", DType::kComplex128, {20, 3}, {3, 3}, Codec::kZstd},
      {"scalar", DType::kFloat64, {}, {}, Codec::kRaw},
      {"empty", DType::kFloat32, {0, 5}, {1, 5}, Codec::kRaw},
      {"small", DType::kUInt8, {10}, {10}, Codec::kZstd},  // inline (below the threshold)
      {"big", DType::kFloat32, {1024, 256}, {128, 256}, Codec::kZstd},
  };
  return s;
}

struct Fixture {
  TempDir dir;
  std::vector<std::vector<std::byte>> data;
  std::shared_ptr<Reader> reader;

  Fixture() {
    TreeBuilder b;
    b.dict();
    for (size_t i = 0; i < specs().size(); ++i) {
      const Spec& sp = specs()[i];
      uint64_t n = 1;
      for (auto e : sp.shape) n *= e;
      data.push_back(random_array(sp.dtype, n, 7 + i));
      LeafOptions lo;
      lo.chunk_shape = sp.chunk;
      lo.codec = sp.codec;
      b.key(sp.key).array(sp.dtype, sp.shape, ArrayView{data.back().data()}, lo);
    }
    b.key("count").int_value(3);
    b.end();
    WriteOptions wo;
    wo.inline_threshold = 16;
    REQUIRE(save(std::move(*std::move(b).finish()), dir.file("d.jtree"), wo).ok());
    open();
  }
  void open() { reader = *Reader::open(dir.file("d.jtree")); }
  uint32_t leaf(const std::string& key) const { return *reader->find_leaf(key); }
};

// A "device" destination: host memory filled with a marker, so that unwritten bytes show.
struct Dest {
  std::vector<std::byte> bytes;
  explicit Dest(size_t n) : bytes(n, std::byte{0xCD}) {}
};

// Every pinned buffer and stream given back, nothing misused, every queued copy finished
// (`refused`: copies that copy_async refused, never queued), the bound kept.
void check_clean(const HostCopyEngine& e, uint64_t bound, uint64_t refused = 0) {
  const auto s = e.stats();
  CHECK(s.pinned_bytes == 0);
  CHECK(s.allocations == s.frees);
  CHECK(s.streams_created == s.streams_destroyed);
  CHECK(s.misuses == 0);
  CHECK(s.peak_pinned_bytes <= bound);
  CHECK(s.peak_queued_bytes <= bound);
  CHECK(s.copies_done + refused == s.copies_issued);
}

}  // namespace

TEST_CASE("staging plan: pieces cover a box once, in destination order, within the bound") {
  std::mt19937 g(5);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t rank = g() % 4;
    Shape shape(rank), chunk(rank);
    for (size_t d = 0; d < rank; ++d) {
      shape[d] = 1 + g() % 40;
      chunk[d] = 1 + g() % shape[d];
    }
    Box box{Shape(rank), Shape(rank)};
    for (size_t d = 0; d < rank; ++d) {
      uint64_t x = g() % (shape[d] + 1), y = g() % (shape[d] + 1);
      box.begin[d] = std::min(x, y);
      box.end[d] = std::max(x, y);
    }
    const uint64_t item = uint64_t{1} << (g() % 4);
    const uint64_t max_bytes = item * (1 + g() % 200);
    std::vector<staging::Piece> pieces;
    staging::cut_box(3, box, chunk, item, max_bytes, pieces);
    const uint64_t total = box.num_elements() * item;
    uint64_t at = 0;
    for (const auto& p : pieces) {
      REQUIRE(p.request == 3);
      REQUIRE(p.bytes > 0);
      REQUIRE(p.bytes <= max_bytes);
      REQUIRE(p.dst_offset == at);  // in order, no gap, no overlap
      REQUIRE(p.box.num_elements() * item == p.bytes);
      // Its first element's place in the box's C-order destination is its offset.
      uint64_t lin = 0;
      const Shape bs = box.shape();
      for (size_t d = 0; d < rank; ++d) {
        REQUIRE(p.box.begin[d] >= box.begin[d]);
        REQUIRE(p.box.end[d] <= box.end[d]);
        lin = lin * bs[d] + (p.box.begin[d] - box.begin[d]);
      }
      REQUIRE(lin * item == p.dst_offset);
      at += p.bytes;
    }
    REQUIRE(at == total);
    // Packed into buffers: in order, 64-byte aligned, within the buffer.
    const auto batches = staging::pack_pieces(pieces, max_bytes);
    size_t next = 0;
    for (const auto& b : batches) {
      REQUIRE(b.first == next);
      REQUIRE(b.last > b.first);
      for (size_t i = b.first; i < b.last; ++i) {
        const uint64_t off = b.offsets[i - b.first];
        REQUIRE(off % 64 == 0);
        REQUIRE(off + pieces[i].bytes <= max_bytes);
      }
      next = b.last;
    }
    REQUIRE(next == pieces.size());
  }
}

TEST_CASE("staging plan: raw chunks along the cut dimension land whole in one piece") {
  // Rows of 256 bytes, chunks of 37 rows, buffers of 100 rows: pieces of 74 rows (2 chunks).
  std::vector<staging::Piece> pieces;
  staging::cut_box(0, Box::all({300, 64}), {37, 64}, 4, 100 * 256, pieces);
  REQUIRE(pieces.size() == 5);
  for (size_t i = 0; i + 1 < pieces.size(); ++i) CHECK(pieces[i].box.end[0] % 37 == 0);
}

TEST_CASE("load to a device through the host engine: whole leaves and boxes, bit-exact") {
  Fixture f;
  std::mt19937 g(11);
  for (uint64_t staging_bytes : {uint64_t{16384}, uint64_t{1} << 20, uint64_t{256} << 20}) {
    for (int buffers : {1, 2, 4}) {
      CAPTURE(staging_bytes);
      CAPTURE(buffers);
      std::vector<DeviceRequest> reqs;
      std::vector<Dest> dests;
      std::vector<std::vector<std::byte>> want;
      dests.reserve(2 * specs().size());
      for (size_t i = 0; i < specs().size(); ++i) {
        const Spec& sp = specs()[i];
        const uint32_t leaf = f.leaf(sp.key);
        const size_t item = dtype_info(sp.dtype)->item_size;
        // The whole leaf, and a random box of it.
        Box box{Shape(sp.shape.size()), Shape(sp.shape.size())};
        for (size_t d = 0; d < sp.shape.size(); ++d) {
          uint64_t x = g() % (sp.shape[d] + 1), y = g() % (sp.shape[d] + 1);
          box.begin[d] = std::min(x, y);
          box.end[d] = std::max(x, y);
        }
        for (const Box& b : {Box::all(sp.shape), box}) {
          want.push_back(box_reference(f.data[i], sp.shape, b, item));
          dests.emplace_back(want.back().size());
          reqs.push_back({leaf, b, dests.back().bytes.data(), dests.back().bytes.size()});
        }
      }
      HostCopyEngine engine;
      DeviceOptions o;
      o.staging_bytes = staging_bytes;
      o.staging_buffers = buffers;
      Status st = read_many_staged(*f.reader, reqs, engine, o);
      REQUIRE_MESSAGE(st.ok(), st.to_string());
      for (size_t i = 0; i < reqs.size(); ++i) {
        CAPTURE(i);
        CHECK(dests[i].bytes == want[i]);
      }
      check_clean(engine, staging_bytes);
      const auto s = engine.stats();
      CHECK(s.copies_done == s.copies_issued);
      uint64_t total = 0;
      for (const auto& w : want) total += w.size();
      CHECK(s.bytes_copied == total);
      // No more pinned memory than the load needs, and never more buffers than asked for.
      CHECK(s.allocations <= static_cast<uint64_t>(buffers));
    }
  }
}

TEST_CASE("load to a device: unverified reads, and many loads at once") {
  Fixture f;
  const uint32_t leaf = f.leaf("big");
  const auto& sp = specs()[8];
  REQUIRE(sp.key == "big");
  std::vector<std::thread> threads;
  std::vector<Dest> dests(4, Dest(f.data[8].size()));
  std::vector<Status> results(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      HostCopyEngine engine;
      DeviceOptions o;
      o.staging_bytes = 256 << 10;
      o.staging_buffers = 4;
      o.read.verify_checksums = t % 2 == 0;
      o.read.threads = 2;
      DeviceRequest r{leaf, std::nullopt, dests[t].bytes.data(), dests[t].bytes.size()};
      results[t] = read_many_staged(*f.reader, std::span(&r, 1), engine, o);
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) {
    REQUIRE_MESSAGE(results[t].ok(), results[t].to_string());
    CHECK(dests[t].bytes == f.data[8]);
  }
}

TEST_CASE("backpressure: a slow copy engine never makes the load pin or queue more than the bound") {
  Fixture f;
  const uint32_t leaf = f.leaf("big");  // 1 MiB
  for (int buffers : {1, 2, 4}) {
    CAPTURE(buffers);
    HostCopyEngine::Options eo;
    eo.copy_delay_us = 1000;
    HostCopyEngine engine(eo);
    DeviceOptions o;
    o.staging_bytes = 64 << 10;  // 16 buffer loads of 64 KiB
    o.staging_buffers = buffers;
    Dest d(f.data[8].size());
    DeviceRequest r{leaf, std::nullopt, d.bytes.data(), d.bytes.size()};
    Status st = read_many_staged(*f.reader, std::span(&r, 1), engine, o);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    CHECK(d.bytes == f.data[8]);
    const auto s = engine.stats();
    // The engine checks that no buffer changed under a queued copy (misuses), and counts the
    // pinned and the queued bytes at their peaks.
    check_clean(engine, o.staging_bytes);
    CHECK(s.peak_pinned_bytes == o.staging_bytes);
    CHECK(s.copies_issued >= 16);
  }
}

TEST_CASE("a copy that fails in the middle of a load: clear error, nothing leaked, nothing after") {
  Fixture f;
  const uint32_t leaf = f.leaf("big");
  DeviceOptions o;
  o.staging_bytes = 64 << 10;
  o.staging_buffers = 4;  // 16 KiB each
  // The whole leaf through `engine` into d (the options as each case sets them).
  auto load = [&](HostCopyEngine& engine, Dest& d) {
    DeviceRequest r{leaf, std::nullopt, d.bytes.data(), d.bytes.size()};
    return read_many_staged(*f.reader, std::span(&r, 1), engine, o);
  };
  SUBCASE("at once (copy_async fails)") {
    // Two buffers, two fillers, one 16 KiB copy per buffer load.
    o.staging_bytes = 32 << 10;
    o.staging_buffers = 2;
    HostCopyEngine::Options eo;
    eo.fail_copy_at = 5;
    eo.copy_delay_us = 200;
    HostCopyEngine engine(eo);
    Dest d(f.data[8].size());
    Status st = load(engine, d);
    REQUIRE(st.code() == StatusCode::kIOError);
    CHECK(st.message().find("d.jtree: leaf big") != std::string::npos);
    CHECK(st.message().find("copy to host stand-in") != std::string::npos);
    CHECK(st.message().find("injected failure of copy 5") != std::string::npos);
    check_clean(engine, o.staging_bytes, 1);
    // Nothing after, whatever the threads' timing: load b uses slot b % 2 after load b - 2
    // has queued its copy, and the fillers claim loads in order. Copy 5 belongs to a load
    // k <= 6 (five loads queued before it, at most one other claimed but unqueued). The other
    // filler cannot queue load k + 2, which waits for load k's turn on its slot, given only
    // with the failure. So at most the k + 2 <= 8 loads below k + 2 issue a copy (the failed
    // one counted), and loads from 8 on never reach the destination.
    CHECK(engine.stats().copies_issued >= 6);
    CHECK(engine.stats().copies_issued <= 8);
    CHECK(std::all_of(d.bytes.begin() + 8 * (16 << 10), d.bytes.end(),
                      [](std::byte x) { return x == std::byte{0xCD}; }));
  }
  SUBCASE("late (reported by sync)") {
    HostCopyEngine::Options eo;
    eo.fail_async_at = 3;
    HostCopyEngine engine(eo);
    Dest d(f.data[8].size());
    Status st = load(engine, d);
    REQUIRE(st.code() == StatusCode::kIOError);
    CHECK(st.message().find("leaf big") != std::string::npos);
    CHECK(st.message().find("injected asynchronous failure") != std::string::npos);
    check_clean(engine, o.staging_bytes);
    // Nothing after, whatever the threads' timing (a bound that assumed prompt threads failed
    // under TSan with 18): buffer load b (one 16 KiB copy) uses slot b % 4 after load b - 4
    // has queued its copy, and 4 fillers claim loads in order. Copy 3 belongs to a load k
    // <= 6 (at most 3 loads queued before it, and at most 3 others claimed but unqueued).
    // Its failure is seen by load k + 4, which settles that slot and queues nothing; until
    // then loads k + 8, k + 12 and k + 16 wait for their turn on it, each holding a filler
    // (so no load from k + 16 on is queued). Of the k + 16 loads below k + 16, all but
    // k + 4, k + 8 and k + 12 may queue a copy: at most k + 13 <= 19 copies, and loads from
    // 22 on never reach the destination.
    CHECK(engine.stats().copies_issued <= 19);
    CHECK(std::all_of(d.bytes.begin() + 22 * (16 << 10), d.bytes.end(),
                      [](std::byte x) { return x == std::byte{0xCD}; }));
  }
  SUBCASE("pinned memory refused") {
    HostCopyEngine::Options eo;
    eo.max_pinned_bytes = 40 << 10;  // two of the four 16 KiB buffers
    HostCopyEngine engine(eo);
    Dest d(f.data[8].size());
    Status st = load(engine, d);
    REQUIRE(st.code() == StatusCode::kResourceExhausted);
    // The file and the leaf named, then the engine's word (pinned memory is what a container
    // runs short of first).
    CHECK(st.message().find("d.jtree: leaf big") != std::string::npos);
    CHECK(st.message().find("host stand-in: cannot pin 16384 more bytes") != std::string::npos);
    check_clean(engine, o.staging_bytes);
    // Buffers are allocated as the fillers first need them: the load stops at the first one
    // refused, having pinned no more than allowed.
    CHECK(engine.stats().allocations <= 4);
    CHECK(engine.stats().peak_pinned_bytes <= uint64_t{40} << 10);
  }
  SUBCASE("an allocation that throws, on whichever filler") {
    // std::bad_alloc on a helper thread used to end the process (std::terminate): now the
    // load fails with ResourceExhausted naming the leaf, whichever of the four fillers (the
    // caller or a helper) made the allocation that threw.
    for (int64_t n = 0; n < 4; ++n) {
      CAPTURE(n);
      HostCopyEngine::Options eo;
      eo.throw_allocation_at = n;
      eo.copy_delay_us = 100;
      HostCopyEngine engine(eo);
      Dest d(f.data[8].size());
      Status st = load(engine, d);
      REQUIRE(st.code() == StatusCode::kResourceExhausted);
      CHECK(st.message().find("d.jtree: leaf big") != std::string::npos);
      CHECK(st.message().find("out of memory") != std::string::npos);
      check_clean(engine, o.staging_bytes);
    }
  }
}

TEST_CASE("a load of many tiny leaves shares its buffer loads, and pins about its own size") {
  // (Buffers sized by the largest request alone made one buffer load per leaf here: a read,
  // the copies and a stream sync for every 64 bytes.)
  TempDir dir;
  constexpr int kLeaves = 500;
  std::vector<std::vector<std::byte>> data;
  TreeBuilder b;
  b.dict();
  for (int i = 0; i < kLeaves; ++i) {
    data.push_back(random_array(DType::kFloat32, 16, 100 + i));
    LeafOptions lo;
    lo.codec = i % 2 ? Codec::kZstd : Codec::kRaw;
    b.key("w" + std::to_string(i)).array(DType::kFloat32, {16}, ArrayView{data.back().data()}, lo);
  }
  b.end();
  WriteOptions wo;
  wo.inline_threshold = 0;  // every leaf in a chunk of its own
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("tiny.jtree"), wo).ok());
  auto reader = *Reader::open(dir.file("tiny.jtree"));
  std::vector<Dest> dests;
  dests.reserve(kLeaves);
  std::vector<DeviceRequest> reqs;
  for (int i = 0; i < kLeaves; ++i) {
    dests.emplace_back(data[i].size());
    reqs.push_back({*reader->find_leaf("w" + std::to_string(i)), std::nullopt,
                    dests.back().bytes.data(), dests.back().bytes.size()});
  }
  HostCopyEngine engine;
  DeviceOptions o;  // the defaults: 128 MiB in 8 buffers
  Status st = read_many_staged(*reader, reqs, engine, o);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  for (int i = 0; i < kLeaves; ++i) CHECK(dests[i].bytes == data[i]);
  const auto s = engine.stats();
  check_clean(engine, o.staging_bytes);
  CHECK(s.copies_issued == kLeaves);
  CHECK(s.syncs <= 2 * static_cast<uint64_t>(o.staging_buffers));  // a few buffer loads
  CHECK(s.peak_pinned_bytes <= 2 * kLeaves * 64);                  // about the load's size
}

TEST_CASE("a damaged chunk in the middle of a load: Corruption naming the leaf, nothing leaked") {
  Fixture f;
  const uint32_t leaf = f.leaf("big");
  const Leaf& l = f.reader->leaf(leaf);
  const ChunkInfo c = f.reader->chunk(l.first_chunk + 4);  // the fifth of eight chunks
  auto bytes = read_file(f.dir.file("d.jtree"));
  bytes[c.file_offset + c.stored_size / 2] ^= std::byte{0x40};
  write_file(f.dir.file("d.jtree"), bytes);
  f.open();
  HostCopyEngine::Options eo;
  eo.copy_delay_us = 500;
  HostCopyEngine engine(eo);
  DeviceOptions o;
  o.staging_bytes = 256 << 10;  // a chunk (128 KiB) per buffer, two buffers
  o.staging_buffers = 2;
  o.read.threads = 1;
  Dest d(f.data[8].size());
  DeviceRequest r{leaf, std::nullopt, d.bytes.data(), d.bytes.size()};
  Status st = read_many_staged(*f.reader, std::span(&r, 1), engine, o);
  REQUIRE(st.code() == StatusCode::kCorruption);
  CHECK(st.message().find("leaf big: chunk 4") != std::string::npos);
  check_clean(engine, o.staging_bytes);
  // Chunks 0-2 were copied (their buffer loads were done before chunk 4's began: two
  // fillers), chunk 3 or 5 may be (the second filler's load under way), chunk 4 is not, and
  // nothing after: chunk 6 waits for chunk 4's buffer. Every chunk is whole or untouched.
  const uint64_t copies = engine.stats().copies_issued;
  CHECK(copies >= 3);
  CHECK(copies <= 5);
  const size_t chunk = 128 << 10;
  size_t copied = 0;
  for (size_t k = 0; k < 8; ++k) {
    CAPTURE(k);
    const auto at = d.bytes.begin() + k * chunk;
    const bool same = std::equal(at, at + chunk, f.data[8].begin() + k * chunk);
    const bool untouched =
        std::all_of(at, at + chunk, [](std::byte x) { return x == std::byte{0xCD}; });
    CHECK((same || untouched));
    if (k < 3) CHECK(same);
    if (k == 4 || k >= 6) CHECK(untouched);
    copied += same;
  }
  CHECK(copied == copies);
}

TEST_CASE("cancellation: progress returning false stops the load, frees everything") {
  Fixture f;
  const uint32_t leaf = f.leaf("big");
  HostCopyEngine::Options eo;
  eo.copy_delay_us = 300;
  HostCopyEngine engine(eo);
  DeviceOptions o;
  o.staging_bytes = 64 << 10;
  o.staging_buffers = 4;  // 16 KiB each
  int calls = 0;
  uint64_t last_total = 0;
  o.read.progress = [&](uint64_t done, uint64_t total) {
    last_total = total;
    CHECK(done <= total);
    return ++calls < 3;
  };
  Dest d(f.data[8].size());
  DeviceRequest r{leaf, std::nullopt, d.bytes.data(), d.bytes.size()};
  Status st = read_many_staged(*f.reader, std::span(&r, 1), engine, o);
  REQUIRE(st.code() == StatusCode::kAborted);
  CHECK(st.message().find("cancelled") != std::string::npos);
  CHECK(calls == 3);
  CHECK(last_total == f.data[8].size());
  check_clean(engine, o.staging_bytes);
  // One 16 KiB piece per buffer load: the three reported, and at most the ones the other
  // three fillers had under way, none after.
  const uint64_t copies = engine.stats().copies_issued;
  CHECK(copies >= 3);
  CHECK(copies <= 6);
  // Each 16 KiB piece is either copied whole or untouched.
  size_t copied = 0;
  for (size_t at = 0; at < d.bytes.size(); at += 16 << 10) {
    const bool same = std::equal(d.bytes.begin() + at, d.bytes.begin() + at + (16 << 10),
                                 f.data[8].begin() + at);
    const bool untouched = std::all_of(d.bytes.begin() + at, d.bytes.begin() + at + (16 << 10),
                                       [](std::byte x) { return x == std::byte{0xCD}; });
    CHECK((same || untouched));
    copied += same;
  }
  CHECK(copied == copies);
}

TEST_CASE("bad requests and options: InvalidArgument naming the leaf, nothing pinned") {
  Fixture f;
  HostCopyEngine engine;
  Dest d(64);
  const uint32_t small = f.leaf("small");
  auto one = [&](DeviceRequest r, DeviceOptions o = {}) {
    return read_many_staged(*f.reader, std::span(&r, 1), engine, o);
  };
  Status st = one({small, std::nullopt, d.bytes.data(), 9});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("leaf small: device destination of 9 bytes; the slice needs 10") !=
        std::string::npos);
  st = one({small, std::nullopt, nullptr, 10});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  st = one({small, Box{{2}, {11}}, d.bytes.data(), 9});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("out of bounds") != std::string::npos);
  st = one({f.leaf("count"), std::nullopt, d.bytes.data(), 8});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("leaf count") != std::string::npos);
  st = one({f.reader->num_leaves(), std::nullopt, d.bytes.data(), 8});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  DeviceOptions o;
  o.staging_buffers = 0;
  CHECK(one({small, std::nullopt, d.bytes.data(), 10}, o).code() == StatusCode::kInvalidArgument);
  o.staging_buffers = 4;
  o.staging_bytes = 1000;
  CHECK(one({small, std::nullopt, d.bytes.data(), 10}, o).code() == StatusCode::kInvalidArgument);
  DeviceOptions negative;
  negative.read.threads = -1;  // (ReadOptions::check, as host reads)
  st = one({small, std::nullopt, d.bytes.data(), 10}, negative);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("threads must be >= 0") != std::string::npos);
  CHECK(engine.stats().allocations == 0);
  // An empty box or no request at all: nothing to do, nothing pinned.
  CHECK(one({small, Box{{3}, {3}}, nullptr, 0}).ok());
  CHECK(read_many_staged(*f.reader, {}, engine).ok());
  CHECK(engine.stats().allocations == 0);
}

TEST_CASE("the CUDA engine where there is no device: NotSupported, a clear message") {
  // (On a machine with a GPU this is tests/unit/test_device_cuda.cc's business.)
  if (cuda_device_count() > 0) return;
  Fixture f;
  auto engine = make_cuda_copy_engine(0);
  REQUIRE(!engine.ok());
  CHECK(engine.status().code() == StatusCode::kNotSupported);
  MESSAGE("make_cuda_copy_engine here: " << engine.status().to_string()
                                          << std::string(cuda_built() ? " (CUDA build)" : " (no CUDA)"));
  Dest d(10);
  DeviceRequest r{f.leaf("small"), std::nullopt, d.bytes.data(), 10};
  CHECK(read_many_to_device(*f.reader, std::span(&r, 1)).code() == StatusCode::kNotSupported);
  // Pinning ahead: the same NotSupported; bad options are the caller's mistake first.
  CHECK(pin_staging_buffers_async().code() == StatusCode::kNotSupported);
  DeviceOptions bad;
  bad.staging_buffers = 0;
  CHECK(pin_staging_buffers_async(bad).code() == StatusCode::kInvalidArgument);
  CHECK(allocate_device_memory(0, 1024).status().code() == StatusCode::kNotSupported);
}

TEST_CASE("the pinned cache: reuses blocks of a fitting size, holds at most its capacity") {
  staging::PinnedCache cache(300);
  std::vector<std::byte> a(200), b(100), c(64);
  CHECK(cache.take(10).empty());  // (empty cache)
  cache.lend(a.data(), a.size());
  cache.lend(b.data(), b.size());
  cache.lend(c.data(), c.size());
  size_t size = 0;
  CHECK(cache.give(a.data(), size));
  CHECK(size == 200);
  CHECK(cache.give(b.data(), size));
  CHECK(cache.cached_bytes() == 300);
  CHECK_FALSE(cache.give(c.data(), size));  // over the capacity: the caller frees it
  CHECK(size == 64);
  // The smallest block of at least the size asked, and at most twice it.
  std::span<std::byte> got = cache.take(90);
  CHECK(got.data() == b.data());
  CHECK(got.size() == 90);
  CHECK(cache.take(90).empty());  // a (200) is more than twice 90: not lent for it
  got = cache.take(120);
  CHECK(got.data() == a.data());
  CHECK(cache.cached_bytes() == 0);
  // Given back, a block counts with its real size, not the size it was lent for.
  size = 0;
  CHECK(cache.give(b.data(), size));
  CHECK(size == 100);
  CHECK(cache.give(a.data(), size));
  CHECK(cache.cached_bytes() == 300);
  const auto drained = cache.drain();
  CHECK(drained.size() == 2);
  CHECK(drained[0].second + drained[1].second == 300);
  CHECK(cache.cached_bytes() == 0);
  CHECK(cache.take(1).empty());
}

TEST_CASE("the pinned cache: blocks pinned ahead of a load are awaited only where they fit") {
  staging::PinnedCache cache(250);
  std::vector<std::byte> a(100), b(100), c(100);
  cache.expect(100);
  cache.expect(100);
  CHECK(cache.count(100) == 2);
  CHECK(cache.awaits(100));
  CHECK(cache.awaits(50));        // (a block of at most twice the size asked serves it)
  CHECK_FALSE(cache.awaits(49));  // too large for it: the load pins its own
  CHECK_FALSE(cache.awaits(101));
  CHECK(cache.take(100).empty());  // (not here yet)
  CHECK(cache.arrived(a.data(), 100));
  CHECK(cache.awaits(100));  // (one still expected)
  CHECK(cache.take(80).data() == a.data());
  cache.given_up(100);  // (pinning the second failed)
  CHECK_FALSE(cache.awaits(100));
  CHECK(cache.count(100) == 0);
  cache.given_up(100);  // (nothing expected: no effect)
  // Arrivals count against the capacity as blocks given back do.
  cache.expect(100);
  cache.expect(100);
  CHECK(cache.count(100) == 2);
  CHECK(cache.arrived(b.data(), 100));
  CHECK(cache.arrived(c.data(), 100));
  CHECK(cache.cached_bytes() == 200);
  CHECK(cache.count(100) == 2);  // (cached now)
  std::vector<std::byte> d(100);
  cache.expect(100);
  CHECK_FALSE(cache.arrived(d.data(), 100));  // over the capacity: the caller frees it
  CHECK_FALSE(cache.awaits(100));
  CHECK(cache.drain().size() == 2);
}

TEST_CASE("the pinned cache: room for blocks pinned ahead counts those held and expected") {
  // (pin_staging_buffers_async pins ahead no more than this: a block that arrives past the
  // capacity is freed, and the load it was for pins its own: pinned twice.)
  staging::PinnedCache cache(1000);
  CHECK(cache.room_for(300) == 3);
  cache.expect(300);
  cache.expect(300);
  CHECK(cache.room_for(300) == 1);  // (two expected: 600 of 1000)
  CHECK(cache.room_for(100) == 4);
  std::vector<std::byte> a(300), b(300), c(300);
  CHECK(cache.arrived(a.data(), 300));
  CHECK(cache.room_for(300) == 1);  // (one held, one expected)
  cache.given_up(300);
  CHECK(cache.room_for(300) == 2);
  cache.expect(300);
  cache.expect(300);
  CHECK(cache.room_for(300) == 0);  // full: a third device's load pins its own
  CHECK(cache.room_for(1) == 100);
  CHECK(cache.arrived(b.data(), 300));
  CHECK(cache.arrived(c.data(), 300));  // (every block expected within the room fits)
  CHECK(cache.cached_bytes() == 900);
  CHECK(cache.room_for(0) > 0);
  CHECK(cache.drain().size() == 3);
  CHECK(cache.room_for(300) == 3);
}

TEST_CASE("DeviceOptions::check: each setting out of range refused, naming it; never clamped") {
  auto refused = [](const DeviceOptions& o, const std::string& words) {
    const Status st = o.check();
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(st.message().find(words) != std::string::npos, st.message());
  };
  CHECK(DeviceOptions{}.check().ok());
  DeviceOptions o;
  o.staging_buffers = 0;
  refused(o, "staging_buffers is 0; it must be from 1 to 64");
  o.staging_buffers = 65;
  refused(o, "staging_buffers is 65");
  o.staging_buffers = 64;
  o.staging_bytes = 64 * DeviceOptions::kMinBufferBytes;
  CHECK(o.check().ok());
  o.staging_bytes -= 1;
  refused(o, "below the minimum of 4096 bytes per buffer");
  o.staging_bytes = 0;
  refused(o, "staging_bytes 0 over 64 buffers");
  o.staging_bytes = DeviceOptions::kMaxStagingBytes;
  CHECK(o.check().ok());
  o.staging_bytes = ~uint64_t{0};  // (a C caller's -1)
  refused(o, "staging_bytes is 18446744073709551615; it must be at most");
  o = {};
  o.device = -1;
  refused(o, "device is -1");
  o = {};
  o.direct_io = static_cast<DirectIo>(7);
  refused(o, "direct_io is 7");
  o = {};
  o.read.max_bytes_in_flight = 0;  // (read.check() is part of it)
  refused(o, "max_bytes_in_flight");
}

TEST_CASE("DirectIo names: parse_direct_io and direct_io_name agree; anything else refused") {
  for (DirectIo m : {DirectIo::kAuto, DirectIo::kOn, DirectIo::kOff}) {
    auto back = parse_direct_io(direct_io_name(m));
    REQUIRE(back.ok());
    CHECK(*back == m);
  }
  CHECK(direct_io_name(DirectIo::kAuto) == "auto");
  CHECK(direct_io_name(DirectIo::kOn) == "on");
  CHECK(direct_io_name(DirectIo::kOff) == "off");
  for (std::string_view bad : {"sometimes", "ON", "", "auto "}) {
    auto r = parse_direct_io(bad);
    REQUIRE(!r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().find("direct_io must be \"auto\", \"on\" or \"off\", not \"" +
                                    std::string(bad) + "\"") != std::string::npos);
  }
}

TEST_CASE("bad device options are InvalidArgument before the engine: also without CUDA") {
  // read_many_to_device checks the options before it asks for the CUDA engine, so a caller's
  // mistake is reported as one (naming the file) on every machine, not as NotSupported.
  Fixture f;
  Dest d(10);
  DeviceRequest r{f.leaf("small"), std::nullopt, d.bytes.data(), 10};
  DeviceOptions o;
  o.staging_buffers = 65;
  Status st = read_many_to_device(*f.reader, std::span(&r, 1), o);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find(f.reader->name()) != std::string::npos);
  CHECK(st.message().find("staging_buffers is 65") != std::string::npos);
  o = {};
  o.device = -2;
  st = read_many_to_device(*f.reader, std::span(&r, 1), o);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("device is -2") != std::string::npos);
}

TEST_CASE("map_populated: zeroed, page-aligned, writable memory, every page resident") {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (size_t bytes : {size_t{1}, page + 3, size_t{2} << 20, size_t{9} << 20,
                       (size_t{33} << 20) + 5}) {
    for (auto [threads, huge] : {std::pair{1, true}, std::pair{4, true}, std::pair{3, false}}) {
      CAPTURE(bytes);
      CAPTURE(threads);
      CAPTURE(huge);
      auto mem = map_populated(bytes, threads, huge);
      REQUIRE(mem.ok());
      CHECK(mem->size() == bytes);
      CHECK(reinterpret_cast<uintptr_t>(mem->data()) % page == 0);
      if (huge && bytes >= kHugePageBytes) {  // (huge pages need their alignment)
        CHECK(reinterpret_cast<uintptr_t>(mem->data()) % kHugePageBytes == 0);
      }
      std::vector<unsigned char> resident((bytes + page - 1) / page);
      REQUIRE(::mincore(mem->data(), bytes, resident.data()) == 0);
      CHECK(std::all_of(resident.begin(), resident.end(), [](unsigned char r) { return r & 1; }));
      CHECK(std::all_of(mem->begin(), mem->end(), [](std::byte b) { return b == std::byte{0}; }));
      std::memset(mem->data(), 0xAB, bytes);
      CHECK((*mem)[bytes - 1] == std::byte{0xAB});
      unmap_populated(*mem);
    }
  }
  CHECK(map_populated(0, 1).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("map_populated: staging memory is not inherited by a child of fork()") {
  // A pinned page is copied into the child at a fork (it cannot be shared copy-on-write while
  // a device may read it): all the staging memory, for each data-loader worker forked after a
  // GPU load. Not mapped in the child at all (MADV_DONTFORK); an ordinary mapping is.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto staging = map_populated(size_t{4} << 20, 2, true);
  REQUIRE(staging.ok());
  void* ordinary =
      ::mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(ordinary != MAP_FAILED);
  std::memset(ordinary, 1, page);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // mincore fails with ENOMEM on addresses not mapped. (_exit: no test framework here.)
    unsigned char v[1];
    const bool staging_absent = ::mincore(staging->data(), page, v) != 0 && errno == ENOMEM;
    const bool ordinary_present = ::mincore(ordinary, page, v) == 0;
    ::_exit(staging_absent && ordinary_present ? 0 : (staging_absent ? 2 : 3));
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // 3: the staging memory was mapped in the child
  ::munmap(ordinary, page);
  unmap_populated(*staging);
}

// The kernel's word on whether the mapping that holds `p` may have transparent huge pages
// (/proc/self/smaps' THPeligible, Linux 5.x+): -1 where it does not say.
static int thp_eligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(smaps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      return std::atoi(line.c_str() + 12);
    }
  }
  return -1;
}

TEST_CASE("map_populated: staging memory asks for huge pages, and only when told to") {
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string enabled;
  std::getline(setting, enabled);
  auto huge = map_populated(size_t{8} << 20, 2, true);
  auto small = map_populated(size_t{8} << 20, 2, false);
  REQUIRE(huge.ok());
  REQUIRE(small.ok());
  const int huge_eligible = thp_eligible(huge->data());
  const int small_eligible = thp_eligible(small->data());
  if (enabled.empty() || huge_eligible < 0) {
    MESSAGE("SKIPPED (not counted): this kernel has no transparent huge pages or does not say "
            "THPeligible in /proc/self/smaps: '" << enabled << "'");
  } else if (enabled.find("[never]") != std::string::npos) {
    CHECK(huge_eligible == 0);  // (the system said no: small pages, still correct memory)
  } else {
    CHECK(huge_eligible == 1);  // (MADV_HUGEPAGE, whether the setting is madvise or always)
    if (enabled.find("[madvise]") != std::string::npos) CHECK(small_eligible == 0);
  }
  unmap_populated(*huge);
  unmap_populated(*small);
}
