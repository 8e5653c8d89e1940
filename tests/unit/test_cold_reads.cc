// Cold reads of local files (lib/src/read/cold_reads.h): Reader::read_many of a file whose
// pages are not in the page cache reads its fetch units with O_DIRECT, and gives the bytes a
// buffered read gives, for compressed chunks, raw chunks whose file offsets and ends are off
// every block boundary, a chunk larger than an O_DIRECT part, slices that cut chunks and a
// file whose size is not a multiple of the block size. A warm file, a tmpfs file (always in
// memory), a file system that refuses O_DIRECT and reads the kernel refuses mid-load read
// buffered; a damaged chunk read with O_DIRECT is Corruption naming the leaf and chunk. A load
// to a device (through the host stand-in engine) reads its compressed pieces the same way.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "cuda/host_copy_engine.h"
#include "io/direct_read.h"
#include "jtree/device.h"
#include "raw_chunk_files.h"
#include "read/cold_reads.h"
#include "test_util.h"

using namespace jtree;
using namespace jtree::testing;
using jtree::testing::raw_files::disk_dir;
using jtree::testing::raw_files::evict;
using jtree::testing::raw_files::read_into_cache;
using jtree::testing::raw_files::require_all;
using jtree::testing::raw_files::SubDir;

namespace {

struct ColdSpec {
  std::string key;
  DType dtype;
  Shape shape;
  Shape chunk;
  Codec codec;
};

// bf16 weights compressed (about 0.7 of their size: more than kMinDirectBytes stored); raw
// bytes in chunks of an odd size (offsets and ends off any block boundary); one raw chunk
// larger than an O_DIRECT part (a fetch unit of its own, beyond kPartBytes).
const std::vector<ColdSpec>& cold_specs() {
  static const std::vector<ColdSpec> s = {
      {"z", DType::kBFloat16, {1536, 1000}, {100, 1000}, Codec::kZstd},
      {"odd", DType::kUInt8, {3000007}, {1000003}, Codec::kRaw},
      {"big", DType::kFloat32, {2400001}, {2400001}, Codec::kRaw},
  };
  return s;
}

// A file of cold_specs() in `dir` (raw chunks aligned to 64 bytes only), its arrays kept.
struct ColdFile {
  std::string path;
  std::vector<std::vector<std::byte>> data;
  std::shared_ptr<Reader> reader;

  ColdFile(const std::filesystem::path& dir, const std::string& name = "cold.jtree") {
    path = (dir / name).string();
    TreeBuilder b;
    b.dict();
    for (size_t i = 0; i < cold_specs().size(); ++i) {
      const ColdSpec& sp = cold_specs()[i];
      uint64_t n = 1;
      for (auto e : sp.shape) n *= e;
      data.push_back(sp.dtype == DType::kBFloat16 ? bf16_weights(n, 0.02f, 7 + i)
                                                  : random_array(sp.dtype, n, 7 + i));
      LeafOptions lo;
      lo.chunk_shape = sp.chunk;
      lo.codec = sp.codec;
      b.key(sp.key).array(sp.dtype, sp.shape, ArrayView{data.back().data()}, lo);
    }
    b.end();
    WriteOptions wo;
    wo.alignment = 64;
    REQUIRE(save(std::move(*std::move(b).finish()), path, wo).ok());
    reopen();
  }
  void reopen() { reader = *Reader::open(path); }
  uint32_t leaf(const std::string& key) const { return *reader->find_leaf(key); }
};

// Whole leaves and slices that cut chunks, with the bytes each must give.
struct ColdLoad {
  std::vector<ReadRequest> reqs;
  std::vector<std::vector<std::byte>> dests, want;

  explicit ColdLoad(const ColdFile& f) {
    std::vector<std::pair<size_t, Box>> parts;
    for (size_t i = 0; i < cold_specs().size(); ++i) {
      parts.push_back({i, Box::all(cold_specs()[i].shape)});
    }
    parts.push_back({0, Box{{150, 3}, {1234, 997}}});
    parts.push_back({1, Box{{12345}, {2999999}}});
    dests.reserve(parts.size());
    for (const auto& [i, box] : parts) {
      const ColdSpec& sp = cold_specs()[i];
      want.push_back(box_reference(f.data[i], sp.shape, box, dtype_info(sp.dtype)->item_size));
      dests.emplace_back(want.back().size(), std::byte{0xCD});
      reqs.push_back({f.leaf(sp.key), box, dests.back()});
    }
  }
  void check() const {
    for (size_t i = 0; i < reqs.size(); ++i) {
      CAPTURE(i);
      CHECK(dests[i] == want[i]);
    }
  }
};

double cached_share(const ColdFile& f) {
  return io::cached_fraction(*f.reader->source(), {&io::kWholeFile, 1}).value_or(-1);
}

// Evicts the file; false (said loudly) where its pages stay in the page cache all the same.
bool make_cold(const ColdFile& f) {
  evict(f.path);
  if (cached_share(f) < io::kCachedEnough) return true;
  MESSAGE("!!!! the page cache still holds " << cached_share(f) * 100 << "% of " << f.path
                                            << " after POSIX_FADV_DONTNEED: no cold read here");
  if (require_all()) FAIL("JTREE_TEST_REQUIRE_ALL=1 and the file could not be made cold");
  return false;
}

// read_many of the whole ColdLoad; the bytes read with O_DIRECT meanwhile.
uint64_t read_all(const ColdFile& f, ColdLoad& l, ReadOptions o = {}) {
  const uint64_t before = cold::direct_bytes_read_for_testing();
  const Status st = f.reader->read_many(l.reqs, o);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  l.check();
  return cold::direct_bytes_read_for_testing() - before;
}

// Flips one byte of the file at `offset`.
void damage(const std::string& path, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  unsigned char b = 0;
  REQUIRE(::pread(fd, &b, 1, static_cast<off_t>(offset)) == 1);
  b ^= 0x5A;
  REQUIRE(::pwrite(fd, &b, 1, static_cast<off_t>(offset)) == 1);
  ::close(fd);
}

}  // namespace

TEST_CASE("cold read_many on a disk file system: O_DIRECT, bytes identical to a buffered read") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  ColdFile f(sub.path);
  const uint64_t size = std::filesystem::file_size(f.path);
  const io::DirectReadSupport s = io::direct_read_support(*f.reader->source());
  REQUIRE_MESSAGE(s.available, s.reason);
  MESSAGE("file of " << size << " bytes, O_DIRECT alignment " << s.offset_align);
  CHECK(size % s.offset_align != 0);
  // The raw chunks of "odd" start and end off the alignment (head and tail slack).
  const Leaf& odd = f.reader->leaf(f.leaf("odd"));
  bool unaligned = false;
  for (uint64_t k = 0; k < Tree::chunk_count(odd); ++k) {
    const ChunkInfo c = f.reader->chunk(odd.first_chunk + k);
    CHECK(c.encoding == ChunkEncoding::kRaw);
    unaligned |= c.file_offset % s.offset_align != 0;
  }
  CHECK(unaligned);
  const ChunkInfo z0 = f.reader->chunk(f.reader->leaf(f.leaf("z")).first_chunk);
  CHECK(z0.encoding != ChunkEncoding::kRaw);
  CHECK(f.reader->chunk(f.reader->leaf(f.leaf("big")).first_chunk).stored_size >
        cold::kPartBytes);

  for (bool verify : {true, false}) {
    for (int threads : {1, 0, 16}) {
      CAPTURE(verify);
      CAPTURE(threads);
      if (!make_cold(f)) return;
      ColdLoad l(f);
      ReadOptions o;
      o.verify_checksums = verify;
      o.threads = threads;
      // Every byte of the file's chunk region read once, with O_DIRECT (plus alignment slack).
      const uint64_t direct = read_all(f, l, o);
      CHECK(direct >= size / 2);
      CHECK(direct <= size + 64 * s.offset_align);
    }
  }
  // A small bound on bytes in flight: one O_DIRECT part at a time, the same bytes.
  {
    if (!make_cold(f)) return;
    ColdLoad l(f);
    ReadOptions o;
    o.max_bytes_in_flight = 1 << 20;
    CHECK(read_all(f, l, o) > 0);
  }
}

TEST_CASE("cold read_many: a warm file, a small read and a file in memory read buffered") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  ColdFile f(sub.path);
  read_into_cache(f.path);
  REQUIRE(cached_share(f) >= io::kCachedEnough);
  {
    ColdLoad l(f);
    CHECK(read_all(f, l) == 0);
  }
  // Under kMinDirectBytes: buffered, even cold.
  if (make_cold(f)) {
    std::vector<std::byte> row(1000 * 2);
    ReadRequest r{f.leaf("z"), Box{{7, 0}, {8, 1000}}, row};
    const uint64_t before = cold::direct_bytes_read_for_testing();
    REQUIRE(f.reader->read_many({&r, 1}).ok());
    CHECK(cold::direct_bytes_read_for_testing() == before);
    CHECK(row == box_reference(f.data[0], cold_specs()[0].shape, *r.box, 2));
  }
  // tmpfs: its files are memory (a tmpfs file is always "cached"), whether or not the kernel
  // accepts O_DIRECT there (Linux 6.6+ does).
  const std::filesystem::path shm("/dev/shm");
  if (!std::filesystem::is_directory(shm) || ::access(shm.c_str(), W_OK) != 0) {
    MESSAGE("!!!! no writable /dev/shm: the tmpfs case is NOT tested");
    if (require_all()) FAIL("JTREE_TEST_REQUIRE_ALL=1 and no /dev/shm");
    return;
  }
  SubDir in_memory(shm);
  ColdFile t(in_memory.path);
  evict(t.path);
  CHECK(cached_share(t) == 1.0);
  ColdLoad l(t);
  CHECK(read_all(t, l) == 0);
}

TEST_CASE("cold read_many: O_DIRECT refused at open or mid-load reads buffered, bytes identical") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  ColdFile f(sub.path);
  SUBCASE("the file system refuses O_DIRECT (open gives EINVAL)") {
    io::set_refuse_direct_open_for_testing(true);
    f.reopen();  // (a Source that has not opened its O_DIRECT descriptor yet)
    const io::DirectReadSupport s = io::direct_read_support(*f.reader->source());
    io::set_refuse_direct_open_for_testing(false);
    CHECK_FALSE(s.available);
    CHECK(s.reason.find("does not support O_DIRECT") != std::string::npos);
    if (!make_cold(f)) return;
    ColdLoad l(f);
    CHECK(read_all(f, l) == 0);
  }
  SUBCASE("the kernel refuses every O_DIRECT read (EINVAL)") {
    if (!make_cold(f)) return;
    io::set_refuse_direct_reads_for_testing(true);
    ColdLoad l(f);
    const uint64_t direct = read_all(f, l);
    io::set_refuse_direct_reads_for_testing(false);
    CHECK(direct == 0);
  }
}

TEST_CASE("cold read_many: a damaged chunk read with O_DIRECT is Corruption naming it") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  ColdFile f(sub.path);
  for (const auto& [key, k] : {std::pair<std::string, uint64_t>{"z", 3}, {"odd", 1}}) {
    CAPTURE(key);
    ColdFile g(sub.path, key + "-damaged.jtree");
    const ChunkInfo c = g.reader->chunk(g.reader->leaf(g.leaf(key)).first_chunk + k);
    damage(g.path, c.file_offset + c.stored_size / 2);
    g.reopen();
    if (!make_cold(g)) return;
    ColdLoad l(g);
    const uint64_t before = cold::direct_bytes_read_for_testing();
    const Status st = g.reader->read_many(l.reqs);
    CHECK(cold::direct_bytes_read_for_testing() > before);
    CHECK(st.is_corruption());
    CHECK(st.message().find("leaf " + key + ": chunk " + std::to_string(k)) != std::string::npos);
  }
}

TEST_CASE("cold load to a device: compressed pieces read with O_DIRECT, bytes identical") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  ColdFile f(sub.path);
  if (!make_cold(f)) return;
  const ColdSpec& z = cold_specs()[0];
  std::vector<std::byte> dst(f.data[0].size(), std::byte{0xCD});
  const DeviceRequest req{f.leaf("z"), Box::all(z.shape), dst.data(), dst.size()};
  staging::HostCopyEngine engine;
  DeviceOptions o;
  const uint64_t before = cold::direct_bytes_read_for_testing();
  const Status st = read_many_staged(*f.reader, {&req, 1}, engine, o);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(cold::direct_bytes_read_for_testing() > before);
  CHECK(dst == f.data[0]);
}
