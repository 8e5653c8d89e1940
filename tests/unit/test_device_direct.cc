// O_DIRECT reads of raw chunks into the pinned staging buffers of a load to a device
// (DeviceOptions::direct_io, io/direct_read.h), through the host-memory copy engine: no GPU
// needed. Bytes identical to a buffered read for chunks whose file offsets are aligned and
// unaligned (head and tail slack), odd sizes, empty leaves, compressed leaves and slices
// beside them; a damaged chunk read with O_DIRECT is Corruption naming the key; DeviceStats
// says which path ran (O_DIRECT on a disk file system, buffered where the file system refuses
// O_DIRECT, for memory sources and with direct_io Off); the packing keeps every aligned read
// inside its buffer and off every other piece. The page-cache share that DirectIo::kAuto
// goes by is the same asked with cachestat(2) or, as on older kernels, mincore(2) window by
// window.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include <doctest/doctest.h>

#include "cuda/direct_plan.h"
#include "cuda/host_copy_engine.h"
#include "cuda/staging_plan.h"
#include "io/direct_read.h"
#include "jtree/device.h"
#include "raw_chunk_files.h"
#include "test_util.h"
#include "util/box_copy.h"

using namespace jtree;
using namespace jtree::testing;
using jtree::staging::HostCopyEngine;

using namespace jtree::testing::raw_files;

TEST_CASE("O_DIRECT plan: aligned reads cover their piece, stay in the buffer, overlap nothing") {
  std::mt19937 g(3);
  for (int trial = 0; trial < 500; ++trial) {
    const uint64_t oa = uint64_t{512} << (g() % 4);   // 512..4096
    const uint64_t ma = uint64_t{4} << (g() % 11);    // 4..4096
    const uint64_t buffer = 4 * (2 * oa + ma) + g() % 100000;
    std::vector<staging::Piece> pieces;
    std::vector<uint64_t> offsets;
    const size_t n = 1 + g() % 30;
    for (size_t i = 0; i < n; ++i) {
      staging::Piece p;
      p.bytes = 1 + g() % (buffer - 2 * oa - ma);
      pieces.push_back(p);
      offsets.push_back(g() % 3 == 0 ? staging::kNoFileRun : g() % (uint64_t{1} << 40));
    }
    const auto batches = staging::pack_pieces_direct(pieces, offsets, buffer - ma, oa, ma);
    size_t next = 0;
    for (const auto& b : batches) {
      REQUIRE(b.first == next);
      // Every piece's occupied range: its aligned read for direct ones, its bytes otherwise.
      std::vector<std::pair<uint64_t, uint64_t>> used;
      size_t d = 0;
      for (size_t i = b.first; i < b.last; ++i) {
        const uint64_t off = b.offsets[i - b.first];
        if (d < b.direct.size() && b.direct[d].piece == i) {
          const auto& r = b.direct[d++];
          REQUIRE(offsets[i] != staging::kNoFileRun);
          CHECK(r.file_offset % oa == 0);
          CHECK(r.length % oa == 0);
          CHECK(r.buffer_offset % ma == 0);
          // The piece's bytes land where the file's bytes go.
          CHECK(off - r.buffer_offset == offsets[i] - r.file_offset);
          CHECK(r.file_offset <= offsets[i]);
          CHECK(offsets[i] + pieces[i].bytes <= r.file_offset + r.length);
          CHECK(r.length < pieces[i].bytes + 2 * oa);
          CHECK(r.buffer_offset + r.length <= buffer - ma);
          used.push_back({r.buffer_offset, r.buffer_offset + r.length});
        } else {
          CHECK(off % 64 == 0);
          CHECK(off + pieces[i].bytes <= buffer - ma);
          used.push_back({off, off + pieces[i].bytes});
        }
      }
      CHECK(d == b.direct.size());
      std::sort(used.begin(), used.end());
      for (size_t i = 1; i < used.size(); ++i) CHECK(used[i - 1].second <= used[i].first);
      next = b.last;
    }
    REQUIRE(next == pieces.size());
  }
}

TEST_CASE("O_DIRECT load on a disk file system: bytes identical to a buffered load") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  for (uint32_t alignment : {64u, 4096u}) {
    CAPTURE(alignment);
    File f(sub.path, alignment);
    const io::DirectReadSupport s = io::direct_read_support(*f.reader->source());
    REQUIRE_MESSAGE(s.available, s.reason);
    MESSAGE("O_DIRECT alignment here: file offsets " << s.offset_align << ", memory "
                                                      << s.memory_align);
    // With 64-byte chunk alignment, reads start before their chunks and end after them (head
    // and tail slack); with 4096, at them (when the file system's alignment is at most 4096).
    bool unaligned = false;
    for (const char* key : {"rows", "odd", "slabs", "odd_rows"}) {
      const Leaf& leaf = f.reader->leaf(f.leaf(key));
      for (uint64_t k = 0; k < Tree::chunk_count(leaf); ++k) {
        const ChunkInfo c = f.reader->chunk(leaf.first_chunk + k);
        unaligned |= c.file_offset % s.offset_align != 0 ||
                     (c.file_offset + c.stored_size) % s.offset_align != 0;
      }
    }
    if (s.offset_align > 64) CHECK(unaligned);
    for (uint64_t staging_bytes : {uint64_t{256} << 10, uint64_t{1} << 20, uint64_t{64} << 20}) {
      for (int buffers : {1, 2, 4}) {
        for (bool verify : {true, false}) {
          CAPTURE(staging_bytes);
          CAPTURE(buffers);
          CAPTURE(verify);
          Load l(f);
          DeviceOptions o;
          o.staging_bytes = staging_bytes;
          o.staging_buffers = buffers;
          o.read.verify_checksums = verify;
          const DeviceStats st = load(f, l, o);
          l.check();
          CHECK(st.direct_bytes > 0);
          CHECK(st.direct_bytes + st.buffered_bytes == l.total);
          // The compressed leaf, the tiles and the slice go buffered.
          CHECK(st.buffered_bytes > 0);
          CHECK(st.direct_io_note.empty());
        }
      }
    }
    // direct_io On succeeds the same; Off reads everything buffered.
    {
      Load l(f);
      DeviceOptions o;
      o.direct_io = DirectIo::kOn;
      const DeviceStats st = load(f, l, o);
      l.check();
      CHECK(st.direct_bytes > 0);
    }
    {
      Load l(f);
      DeviceOptions o;
      o.direct_io = DirectIo::kOff;
      const DeviceStats st = load(f, l, o);
      l.check();
      CHECK(st.direct_bytes == 0);
      CHECK(st.buffered_bytes == l.total);
      CHECK(st.direct_io_note == "direct_io is Off");
    }
  }
}

TEST_CASE("O_DIRECT: which pieces qualify") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  File f(sub.path, 64);
  auto one = [&](const std::string& key, std::optional<Box> box) {
    const size_t i = static_cast<size_t>(
        std::find_if(specs().begin(), specs().end(), [&](const Spec& s) { return s.key == key; }) -
        specs().begin());
    const Spec& sp = specs()[i];
    const Box b = box ? *box : Box::all(sp.shape);
    std::vector<std::byte> dst(b.num_elements() * dtype_info(sp.dtype)->item_size);
    DeviceRequest r{f.leaf(key), box, dst.data(), dst.size()};
    DeviceStats stats;
    DeviceOptions o;
    o.stats = &stats;
    HostCopyEngine engine;
    evict(f.path);
    Status st = read_many_staged(*f.reader, std::span(&r, 1), engine, o);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    CHECK(dst == box_reference(f.data[i], sp.shape, b, dtype_info(sp.dtype)->item_size));
    return stats;
  };
  // Whole raw leaves of chunks back to back: everything direct.
  CHECK(one("rows", std::nullopt).direct_bytes == 1024 * 256 * 4);
  CHECK(one("slabs", std::nullopt).direct_bytes == 6 * 64 * 320 * 2);
  // Odd chunk sizes (a leaf's chunks are stored back to back, whatever their size).
  CHECK(one("odd", std::nullopt).direct_bytes == 200003);
  CHECK(one("odd_rows", std::nullopt).direct_bytes == 1001 * 13 * 8);
  // A box of whole chunks.
  CHECK(one("rows", Box{{128, 0}, {512, 256}}).direct_bytes == 384 * 256 * 4);
  // A slice that cuts chunks, a compressed leaf, one chunk of 8 KiB (below the 32 KiB
  // minimum), tiles: buffered, and the stats say why.
  for (const auto& [key, box] : std::vector<std::pair<std::string, std::optional<Box>>>{
           {"rows", Box{{5, 3}, {900, 200}}},
           {"zstd", std::nullopt},
           {"odd_rows", Box{{77, 0}, {154, 13}}},
           {"tiles", std::nullopt}}) {
    CAPTURE(key);
    const DeviceStats st = one(key, box);
    CHECK(st.direct_bytes == 0);
    CHECK(st.buffered_bytes > 0);
    CHECK(st.direct_io_note.find("no piece is a run of whole raw chunks") != std::string::npos);
  }
  // An empty leaf: nothing read at all.
  const DeviceStats empty = one("empty", std::nullopt);
  CHECK(empty.direct_bytes == 0);
  CHECK(empty.buffered_bytes == 0);
}

TEST_CASE("O_DIRECT plan: runs of whole chunks, and pieces cut at chunk boundaries") {
  TempDir dir;
  File f(dir.path(), 64);
  const uint32_t rows = f.leaf("rows");
  // Rows 128..512: chunks 1..3, back to back, one run.
  auto run = staging::piece_file_run(*f.reader, rows, Box{{128, 0}, {512, 256}}, 384 * 1024);
  REQUIRE(run);
  REQUIRE(run->chunks.size() == 3);
  CHECK(run->chunks[0].local == 1);
  CHECK(run->offset == f.reader->chunk(f.reader->leaf(rows).first_chunk + 1).file_offset);
  CHECK(run->bytes == 384 * 1024);
  // Not runs: part of a chunk, columns of a chunk, tiles, compressed chunks, a wrong size.
  CHECK_FALSE(staging::piece_file_run(*f.reader, rows, Box{{128, 0}, {500, 256}}, 372 * 1024));
  CHECK_FALSE(staging::piece_file_run(*f.reader, rows, Box{{0, 0}, {128, 100}}, 128 * 400));
  CHECK_FALSE(staging::piece_file_run(*f.reader, f.leaf("tiles"), Box{{0, 0}, {64, 256}},
                                      64 * 256 * 4));
  CHECK_FALSE(staging::piece_file_run(*f.reader, f.leaf("zstd"), Box{{0, 0}, {50, 200}},
                                      50 * 200 * 2));
  CHECK_FALSE(staging::piece_file_run(*f.reader, rows, Box{{128, 0}, {512, 256}}, 1000));
  // Slabs of a 3-d leaf: extent 1 before the cut dimension.
  CHECK(staging::piece_file_run(*f.reader, f.leaf("slabs"), Box{{2, 0, 0}, {5, 64, 320}},
                                3 * 64 * 320 * 2));
  // A piece of chunks 1..3 cut into one per chunk, in destination order.
  staging::Piece piece;
  piece.box = Box{{128, 0}, {512, 256}};
  piece.dst_offset = 4096;
  piece.bytes = 384 * 1024;
  const auto parts = staging::split_at_chunks(*f.reader, rows, piece);
  REQUIRE(parts.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(parts[i].box.begin[0] == 128 * (i + 1));
    CHECK(parts[i].box.end[0] == 128 * (i + 2));
    CHECK(parts[i].dst_offset == 4096 + i * 128 * 1024);
    CHECK(parts[i].bytes == 128 * 1024);
  }
  CHECK(staging::split_at_chunks(*f.reader, rows, staging::Piece{0, Box{{0, 0}, {128, 256}}, 0,
                                                                 128 * 1024})
            .empty());
}

TEST_CASE("O_DIRECT: a damaged raw chunk is Corruption naming the key") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  File f(sub.path, 64);
  // Damage chunk 2 of "odd" (one byte in its middle).
  const Leaf& leaf = f.reader->leaf(f.leaf("odd"));
  const ChunkInfo c = f.reader->chunk(leaf.first_chunk + 2);
  REQUIRE(c.encoding == ChunkEncoding::kRaw);
  {
    const int fd = ::open(f.path.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    std::byte b;
    const off_t at = static_cast<off_t>(c.file_offset + c.stored_size / 2);
    REQUIRE(::pread(fd, &b, 1, at) == 1);
    b ^= std::byte{0x5A};
    REQUIRE(::pwrite(fd, &b, 1, at) == 1);
    ::close(fd);
  }
  f.reopen();
  std::vector<std::byte> dst(200003);
  DeviceRequest r{f.leaf("odd"), std::nullopt, dst.data(), dst.size()};
  for (DirectIo mode : {DirectIo::kOn, DirectIo::kOff}) {
    CAPTURE(static_cast<int>(mode));
    DeviceStats stats;
    DeviceOptions o;
    o.direct_io = mode;
    o.stats = &stats;
    HostCopyEngine engine;
    Status st = read_many_staged(*f.reader, std::span(&r, 1), engine, o);
    REQUIRE(st.code() == StatusCode::kCorruption);
    CHECK(st.message().find("direct.jtree: leaf odd: chunk 2: checksum mismatch") !=
          std::string::npos);
    check_clean(engine, o.staging_bytes);
  }
  // Unverified, the same load goes through O_DIRECT (so the error above came from that path)
  // and hands the damaged bytes on.
  DeviceStats stats;
  DeviceOptions o;
  o.read.verify_checksums = false;
  o.stats = &stats;
  HostCopyEngine engine;
  evict(f.path);
  REQUIRE(read_many_staged(*f.reader, std::span(&r, 1), engine, o).ok());
  CHECK(stats.direct_bytes == 200003);
  CHECK(dst != f.data[1]);
}

TEST_CASE("O_DIRECT refused by the file system: buffered fallback, or an error with On") {
  // Where the file system refuses O_DIRECT (tmpfs before Linux 6.6, some FUSE and network
  // file systems), open(O_DIRECT) fails with EINVAL: simulated here, since this kernel's tmpfs
  // may accept it.
  const auto dir = disk_dir();
  SubDir sub(dir ? *dir : std::filesystem::temp_directory_path());
  File f(sub.path, 64);
  io::set_refuse_direct_open_for_testing(true);
  f.reopen();  // (a new Source: its O_DIRECT descriptor is not open yet)
  Load l(f);
  Status st;
  const DeviceStats stats = load(f, l, DeviceOptions{}, &st);
  io::set_refuse_direct_open_for_testing(false);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  l.check();
  CHECK(stats.direct_bytes == 0);
  CHECK(stats.buffered_bytes == l.total);
  CHECK(stats.direct_io_note.find("does not support O_DIRECT") != std::string::npos);
  // On: NotSupported naming the file and the reason, nothing pinned.
  Load l2(f);
  DeviceOptions o;
  o.direct_io = DirectIo::kOn;
  load(f, l2, o, &st);
  CHECK(st.code() == StatusCode::kNotSupported);
  CHECK(st.message().find("direct.jtree: direct_io is On") != std::string::npos);
  CHECK(st.message().find("does not support O_DIRECT") != std::string::npos);
}

TEST_CASE("O_DIRECT Auto: a file in the page cache is read buffered, a cold one directly") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  File f(sub.path, 64);
  evict(f.path);
  const double cold = cached(f);
  MESSAGE("after POSIX_FADV_DONTNEED: " << cold * 100 << "% of the file in the page cache");
  if (cold < 0 || cold >= 0.5) {
    MESSAGE("!!!! the page cache of " << f.path << " cannot be dropped or measured here: "
            "Auto's choice between O_DIRECT and buffered reads is NOT tested");
    if (require_all()) FAIL("JTREE_TEST_REQUIRE_ALL=1 and the page cache cannot be dropped");
    return;
  }
  read_into_cache(f.path);
  REQUIRE(cached(f) >= 0.9);
  DeviceOptions o;
  DeviceStats warm;
  o.stats = &warm;
  Load l(f);
  HostCopyEngine engine;
  REQUIRE(read_many_staged(*f.reader, l.reqs, engine, o).ok());
  l.check();
  CHECK(warm.direct_bytes == 0);
  CHECK(warm.buffered_bytes == l.total);
  CHECK(warm.direct_io_note.find("no O_DIRECT: the file is in the page cache (") !=
        std::string::npos);
  // Cold again: the raw chunks go with O_DIRECT.
  Load l2(f);
  const DeviceStats cold_load = load(f, l2, DeviceOptions{});
  l2.check();
  CHECK(cold_load.direct_bytes > 0);
  CHECK(cold_load.direct_io_note.empty());
}

TEST_CASE("cached_fraction by mincore (kernels before 6.5), window by window, as by cachestat") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  File f(sub.path, 64);
  // (A kernel with cachestat answers EBADF for this descriptor; one without, ENOSYS.)
  const bool has_cachestat = ::syscall(451, -1, nullptr, nullptr, 0) != 0 && errno == EBADF;
  if (!has_cachestat) {
    MESSAGE("!!!! this kernel has no cachestat(2) (Linux 6.5+): cached_fraction answers with "
            "mincore(2) either way, and the two are NOT compared");
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t size = std::filesystem::file_size(f.path);
  // Windows of one page (and half a page: rounded up to one), 16 pages, and 3/5 of the file:
  // the file spans many windows or two, the last one shorter than the others.
  const std::vector<uint64_t> windows = {page, page / 2 + 1, 16 * page, size * 3 / 5};
  REQUIRE(size > 2 * 16 * page);
  // Both ways of asking give the same share; every window size gives mincore's.
  auto measure = [&](const std::string& state) {
    CAPTURE(state);
    const double by_cachestat = cached(f);
    const double by_mincore = cached_by_mincore(f);
    CAPTURE(by_cachestat);
    CAPTURE(by_mincore);
    REQUIRE(by_mincore >= 0);
    CHECK(std::abs(by_cachestat - by_mincore) <= 0.05);
    for (uint64_t w : windows) {
      CAPTURE(w);
      CHECK(std::abs(cached_by_mincore(f, w) - by_mincore) <= 0.01);
    }
    return by_mincore;
  };
  read_into_cache(f.path);
  CHECK(measure("just read") >= 0.5);
  evict(f.path);
  if (cached(f) >= 0.5) {
    MESSAGE("!!!! the page cache of " << f.path << " cannot be dropped here: mincore's "
            "answer for a cold file is NOT tested");
    if (require_all()) FAIL("JTREE_TEST_REQUIRE_ALL=1 and the page cache cannot be dropped");
    return;
  }
  CHECK(measure("evicted") < 0.5);
  // The first half read again (no readahead): the windows of the second half, the shorter last
  // one among them, find nothing, whatever an earlier window left in mincore's vector.
  {
    const int fd = ::open(f.path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM) == 0);
    std::vector<char> buf(1 << 16);
    for (uint64_t off = 0; off < size / 2; off += buf.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size / 2 - off));
      REQUIRE(::pread(fd, buf.data(), n, static_cast<off_t>(off)) == static_cast<ssize_t>(n));
    }
    ::close(fd);
  }
  const double half = measure("first half read");
  CHECK(half > 0.3);
  CHECK(half < 0.8);
  // Asked about extents, cached_fraction answers for their pages only: the first quarter is in
  // the page cache, the last quarter is not, both ways of asking.
  const std::vector<io::FileExtent> first{{0, size / 4}}, last{{size - size / 4, size / 4}};
  for (uint64_t window : {uint64_t{0}, 16 * page}) {
    CAPTURE(window);
    io::set_cached_fraction_by_mincore_for_testing(window);
    CHECK(io::cached_fraction(*f.reader->source(), first).value_or(-1) > 0.9);
    CHECK(io::cached_fraction(*f.reader->source(), last).value_or(-1) < 0.1);
    io::set_cached_fraction_by_mincore_for_testing(0);
  }
  // Not a local file: nullopt, as with cachestat.
  io::set_cached_fraction_by_mincore_for_testing(page);
  const auto mem = memory_source(std::vector<std::byte>(100), "mem");
  CHECK_FALSE(io::cached_fraction(*mem, {&io::kWholeFile, 1}).has_value());
  io::set_cached_fraction_by_mincore_for_testing(0);
}

TEST_CASE("O_DIRECT on /dev/shm (tmpfs): used where the kernel accepts it, else the fallback") {
  const std::filesystem::path shm("/dev/shm");
  std::error_code ec;
  if (!std::filesystem::is_directory(shm, ec) || ::access("/dev/shm", W_OK) != 0) {
    MESSAGE("!!!! no writable /dev/shm: the tmpfs case is NOT tested");
    if (require_all()) FAIL("JTREE_TEST_REQUIRE_ALL=1 and no /dev/shm");
    return;
  }
  SubDir sub(shm);
  const bool accepts = direct_opens(sub.path);
  MESSAGE("tmpfs here " << (accepts ? "accepts" : "refuses")
                        << " O_DIRECT (Linux 6.6 and later accept it)");
  File f(sub.path, 64);
  Load l(f);
  const DeviceStats st = load(f, l, DeviceOptions{});
  l.check();
  if (accepts) {
    // Auto: tmpfs files are in memory, read buffered; On reads them with O_DIRECT.
    CHECK(st.direct_bytes == 0);
    CHECK(st.direct_io_note.find("the file is in the page cache (100%") != std::string::npos);
    Load l2(f);
    DeviceOptions o;
    o.direct_io = DirectIo::kOn;
    const DeviceStats on = load(f, l2, o);
    l2.check();
    CHECK(on.direct_bytes > 0);
  } else {
    CHECK(st.direct_bytes == 0);
    CHECK(st.buffered_bytes == l.total);
    CHECK(st.direct_io_note.find("does not support O_DIRECT") != std::string::npos);
  }
}

TEST_CASE("O_DIRECT: not for memory sources; On with buffers too small is an error") {
  const auto dir = disk_dir();
  SubDir sub(dir ? *dir : std::filesystem::temp_directory_path());
  File f(sub.path, 64);
  {
    std::FILE* in = std::fopen(f.path.c_str(), "rb");
    REQUIRE(in != nullptr);
    std::vector<std::byte> bytes(std::filesystem::file_size(f.path));
    REQUIRE(std::fread(bytes.data(), 1, bytes.size(), in) == bytes.size());
    std::fclose(in);
    File m = f;
    m.reader = *Reader::open(memory_source(std::move(bytes), "mem.jtree"));
    Load l(m);
    const DeviceStats st = load(m, l, DeviceOptions{});
    l.check();
    CHECK(st.direct_bytes == 0);
    CHECK(st.direct_io_note == "no O_DIRECT: not a local file");
    Load l2(m);
    DeviceOptions o;
    o.direct_io = DirectIo::kOn;
    Status s;
    load(m, l2, o, &s);
    CHECK(s.code() == StatusCode::kNotSupported);
    CHECK(s.message().find("mem.jtree: direct_io is On") != std::string::npos);
  }
  if (dir) {
    Load l(f);
    DeviceOptions o;
    o.direct_io = DirectIo::kOn;
    o.staging_bytes = 8 << 10;  // 4 KiB buffers: below 4 x (2 x 512 + 4) whatever the alignment
    o.staging_buffers = 2;
    Status s;
    load(f, l, o, &s);
    CHECK(s.code() == StatusCode::kNotSupported);
    CHECK(s.message().find("too small for O_DIRECT") != std::string::npos);
    // Auto: the same load buffered.
    Load l2(f);
    o.direct_io = DirectIo::kAuto;
    const DeviceStats st = load(f, l2, o);
    l2.check();
    CHECK(st.direct_bytes == 0);
    CHECK(st.direct_io_note.find("too small") != std::string::npos);
  }
}

TEST_CASE("O_DIRECT reads refused mid-load (EINVAL): Auto reads them buffered, On fails") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  File f(sub.path, 64);
  io::set_refuse_direct_reads_for_testing(true);
  Load l(f);
  Status st;
  const DeviceStats stats = load(f, l, DeviceOptions{}, &st);
  Load l2(f);
  DeviceOptions o;
  o.direct_io = DirectIo::kOn;
  Status st2;
  load(f, l2, o, &st2);
  io::set_refuse_direct_reads_for_testing(false);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  l.check();
  CHECK(stats.direct_bytes == 0);
  CHECK(stats.buffered_bytes == l.total);
  CHECK(stats.direct_io_note.find("O_DIRECT stopped mid-load") != std::string::npos);
  CHECK(stats.direct_io_note.find("refused (EINVAL)") != std::string::npos);
  CHECK(st2.code() == StatusCode::kNotSupported);
  CHECK(st2.message().find("direct.jtree: O_DIRECT read at offset") != std::string::npos);
}

namespace {

// The host engine, its pinned buffers 64 bytes past a page boundary (64-byte aligned, as
// CopyEngine promises, but not aligned for O_DIRECT).
class OffsetEngine final : public CopyEngine {
 public:
  std::string name() const override { return "offset engine"; }
  Result<std::span<std::byte>> allocate_pinned(size_t bytes) override {
    JTREE_ASSIGN_OR_RETURN(std::span<std::byte> b, inner.allocate_pinned(bytes + 64));
    return b.subspan(64);
  }
  void free_pinned(std::span<std::byte> buffer) override {
    inner.free_pinned({buffer.data() - 64, buffer.size() + 64});
  }
  Result<int> create_stream() override { return inner.create_stream(); }
  void destroy_stream(int stream) override { inner.destroy_stream(stream); }
  Status copy_async(void* dst, const std::byte* src, size_t bytes, int stream) override {
    return inner.copy_async(dst, src, bytes, stream);
  }
  Status sync(int stream) override { return inner.sync(stream); }
  HostCopyEngine inner;
};

}  // namespace

TEST_CASE("O_DIRECT: pinned buffers not aligned for it are filled buffered") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  File f(sub.path, 64);
  Load l(f);
  DeviceStats stats;
  DeviceOptions o;
  o.stats = &stats;
  OffsetEngine engine;
  evict(f.path);
  Status st = read_many_staged(*f.reader, l.reqs, engine, o);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  l.check();
  CHECK(engine.inner.stats().misuses == 0);
  if (io::direct_read_support(*f.reader->source()).memory_align <= 64) {
    MESSAGE("O_DIRECT needs no more than 64-byte aligned memory here: nothing to fall back");
    CHECK(stats.direct_bytes > 0);
  } else {
    CHECK(stats.direct_bytes == 0);
    CHECK(stats.buffered_bytes == l.total);
    CHECK(stats.direct_io_note.find("not aligned to") != std::string::npos);
  }
}

TEST_CASE("O_DIRECT: concurrent loads from one fresh reader (the descriptor opened once)") {
  const auto dir = disk_dir();
  if (!dir) return;
  SubDir sub(*dir);
  File f(sub.path, 64);
  f.reopen();  // (its O_DIRECT descriptor not open yet: the loads race to open it)
  std::vector<std::thread> threads;
  std::vector<Status> results(4);
  std::vector<DeviceStats> stats(4);
  std::vector<std::unique_ptr<Load>> loads;
  for (int t = 0; t < 4; ++t) loads.push_back(std::make_unique<Load>(f));
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      DeviceOptions o;
      o.stats = &stats[t];
      o.direct_io = DirectIo::kOn;  // (Auto: one load's buffered reads may warm the file)
      o.staging_bytes = 1 << 20;
      o.read.threads = 2;
      HostCopyEngine engine;
      results[t] = read_many_staged(*f.reader, loads[t]->reqs, engine, o);
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) {
    CAPTURE(t);
    REQUIRE_MESSAGE(results[t].ok(), results[t].to_string());
    loads[t]->check();
    CHECK(stats[t].direct_bytes > 0);
  }
}

namespace {

// A file of one raw float32 leaf of `rows` rows of 1 KiB, chunks of 64 rows, in `dir`.
std::shared_ptr<Reader> rows_file(const std::filesystem::path& dir, const std::string& name,
                                  uint64_t rows, std::vector<std::byte>& data) {
  data = random_array(DType::kFloat32, rows * 256, 5);
  TreeBuilder b;
  LeafOptions lo;
  lo.chunk_shape = {64, 256};
  lo.codec = Codec::kRaw;
  b.dict().key("w").array(DType::kFloat32, {rows, 256}, ArrayView{data.data()}, lo).end();
  const std::string path = (dir / name).string();
  REQUIRE(save(std::move(*std::move(b).finish()), path).ok());
  return *Reader::open(path);
}

}  // namespace

TEST_CASE("a sliced load to a device asks about its own pages only, whatever the file's size") {
  // DirectIo::kAuto asks how much of what the load reads is in the page cache: the slice's
  // chunks, not the whole file (which cost a large file 10-19 ms on every sliced load).
  SubDir sub(std::filesystem::temp_directory_path());
  std::vector<std::byte> small_data, large_data;
  auto small = rows_file(sub.path, "small.jtree", 1024, small_data);      // 1 MiB
  auto large = rows_file(sub.path, "large.jtree", 64 * 1024, large_data);  // 64 MiB
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  auto pages_asked = [&](const Reader& r, const std::vector<std::byte>& data) {
    const Box box{{128, 0}, {160, 256}};  // 32 rows inside one chunk of 64
    std::vector<std::byte> dst(32 * 1024);
    HostCopyEngine engine;
    // (ZeroCopy::kAuto asks on any local file, where DirectIo::kAuto asks only on a file
    // system that takes O_DIRECT.)
    DeviceOptions o;
    o.zero_copy = ZeroCopy::kAuto;
    const uint64_t before = io::cached_fraction_pages_asked_for_testing();
    std::vector<DeviceRequest> reqs{{*r.find_leaf("w"), box, dst.data(), dst.size()}};
    REQUIRE(read_many_staged(r, reqs, engine, o).ok());
    CHECK(std::memcmp(dst.data(), data.data() + 128 * 1024, dst.size()) == 0);
    return io::cached_fraction_pages_asked_for_testing() - before;
  };
  const uint64_t asked_small = pages_asked(*small, small_data);
  const uint64_t asked_large = pages_asked(*large, large_data);
  CAPTURE(asked_small);
  CAPTURE(asked_large);
  CHECK(asked_small > 0);                     // (it is asked: O_DIRECT may serve the file)
  CHECK(asked_small <= 64 * 1024 / page + 1);  // the one chunk of 64 KiB
  CHECK(asked_large == asked_small);
}
