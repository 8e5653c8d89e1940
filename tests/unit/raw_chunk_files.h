// Files for the tests of loads to a device that read raw chunks straight from the file
// (O_DIRECT: test_device_direct.cc; zero copy: test_device_zero_copy.cc), through the host
// stand-in engine: leaves whose chunks are runs and leaves that are not, the loads that meet
// them, a disk file system, eviction from and reading into the page cache.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "cuda/host_copy_engine.h"
#include "io/direct_read.h"
#include "jtree/device.h"
#include "test_util.h"
#include "util/box_copy.h"

namespace jtree::testing::raw_files {

using jtree::staging::HostCopyEngine;

struct Spec {
  std::string key;
  DType dtype;
  Shape shape;
  Shape chunk;
  Codec codec;
};

// Raw leaves whose chunks are runs (1-d, rows, slabs of a 3-d array), of odd sizes (their
// chunks end off any block boundary), a compressed one and tiles (read buffered beside them),
// an empty one.
inline const std::vector<Spec>& specs() {
  static const std::vector<Spec> s = {
      {"rows", DType::kFloat32, {1024, 256}, {128, 256}, Codec::kRaw},       // 128 KiB chunks
      {"odd", DType::kUInt8, {200003}, {40009}, Codec::kRaw},                // odd chunks
      {"slabs", DType::kInt16, {6, 64, 320}, {1, 64, 320}, Codec::kRaw},     // 40 KiB chunks
      {"odd_rows", DType::kFloat64, {1001, 13}, {77, 13}, Codec::kRaw},      // 8,008 B chunks
      {"zstd", DType::kBFloat16, {300, 200}, {50, 200}, Codec::kZstd},
      {"tiles", DType::kInt32, {200, 300}, {64, 128}, Codec::kRaw},
      {"empty", DType::kFloat32, {0, 7}, {1, 7}, Codec::kRaw},
  };
  return s;
}

// A file of specs() in `dir`, its arrays kept for comparison; raw chunks aligned to
// `alignment` in the file (64 by default: most chunk starts off a 4096 boundary).
struct File {
  std::string path;
  std::vector<std::vector<std::byte>> data;
  std::shared_ptr<Reader> reader;

  File(const std::filesystem::path& dir, uint32_t alignment) {
    path = (dir / "direct.jtree").string();
    TreeBuilder b;
    b.dict();
    for (size_t i = 0; i < specs().size(); ++i) {
      const Spec& sp = specs()[i];
      uint64_t n = 1;
      for (auto e : sp.shape) n *= e;
      data.push_back(random_array(sp.dtype, n, 31 + i));
      // Compressible, so that its chunks are stored compressed (the writer keeps a chunk Raw
      // when compressing does not pay, as for random bytes).
      if (sp.codec != Codec::kRaw) {
        for (size_t j = 0; j < data.back().size(); ++j) data.back()[j] = std::byte(j / 64 % 3);
      }
      LeafOptions lo;
      lo.chunk_shape = sp.chunk;
      lo.codec = sp.codec;
      b.key(sp.key).array(sp.dtype, sp.shape, ArrayView{data.back().data()}, lo);
    }
    b.end();
    WriteOptions wo;
    wo.alignment = alignment;
    REQUIRE(save(std::move(*std::move(b).finish()), path, wo).ok());
    reopen();
  }
  void reopen() { reader = *Reader::open(path); }
  uint32_t leaf(const std::string& key) const { return *reader->find_leaf(key); }
};

// Whole leaves, boxes of whole chunks (rows 128..512 of "rows": 3 chunks; slab 2..5 of
// "slabs"), and a slice that cuts chunks: what a load meets.
struct Load {
  std::vector<DeviceRequest> reqs;
  std::vector<std::vector<std::byte>> dests, want;
  uint64_t total = 0;

  explicit Load(const File& f) {
    std::vector<std::pair<size_t, Box>> parts;
    for (size_t i = 0; i < specs().size(); ++i) parts.push_back({i, Box::all(specs()[i].shape)});
    parts.push_back({0, Box{{128, 0}, {512, 256}}});
    parts.push_back({2, Box{{2, 0, 0}, {5, 64, 320}}});
    parts.push_back({0, Box{{5, 3}, {900, 200}}});
    parts.push_back({1, Box{{40009}, {80018}}});
    dests.reserve(parts.size());
    for (const auto& [i, box] : parts) {
      const Spec& sp = specs()[i];
      want.push_back(box_reference(f.data[i], sp.shape, box, dtype_info(sp.dtype)->item_size));
      dests.emplace_back(want.back().size(), std::byte{0xCD});
      reqs.push_back({f.leaf(sp.key), box, dests.back().data(), dests.back().size()});
      total += want.back().size();
    }
  }
  void check() const {
    for (size_t i = 0; i < reqs.size(); ++i) {
      CAPTURE(i);
      CHECK(dests[i] == want[i]);
    }
  }
};

inline void check_clean(const HostCopyEngine& e, uint64_t bound) {
  const auto s = e.stats();
  CHECK(s.pinned_bytes == 0);
  CHECK(s.allocations == s.frees);
  CHECK(s.streams_created == s.streams_destroyed);
  CHECK(s.misuses == 0);
  CHECK(s.peak_pinned_bytes <= bound);
}

// Whether a file in `dir` opens with O_DIRECT (probe of the file system).
inline bool direct_opens(const std::filesystem::path& dir) {
  const std::string p = (dir / "probe").string();
  {
    std::FILE* f = std::fopen(p.c_str(), "wb");
    if (f == nullptr) return false;
    std::fputs("probe", f);
    std::fclose(f);
  }
  const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECT);
  if (fd >= 0) ::close(fd);
  std::filesystem::remove(p);
  return fd >= 0;
}

inline bool require_all() {
  const char* v = std::getenv("JTREE_TEST_REQUIRE_ALL");
  return v != nullptr && std::string(v) == "1";
}

// A directory on a disk file system that accepts O_DIRECT (the temporary directory, else
// /var/tmp or the working directory), or nullopt, said loudly.
inline std::optional<std::filesystem::path> disk_dir() {
  for (const std::filesystem::path& d :
       {std::filesystem::temp_directory_path(), std::filesystem::path("/var/tmp"),
        std::filesystem::current_path()}) {
    std::error_code ec;
    if (std::filesystem::is_directory(d, ec) && ::access(d.c_str(), W_OK) == 0 &&
        direct_opens(d)) {
      return d;
    }
  }
  MESSAGE("!!!! NO local file system here accepts O_DIRECT: the O_DIRECT path is NOT tested "
          "(only the buffered fallback is)");
  if (require_all()) FAIL("JTREE_TEST_REQUIRE_ALL=1 and no file system accepts O_DIRECT");
  return std::nullopt;
}

// A fresh directory under `parent`, removed at the end.
struct SubDir {
  std::filesystem::path path;
  explicit SubDir(const std::filesystem::path& parent) {
    std::string tmpl = (parent / "jtree-direct-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~SubDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// Drops the file's pages from the page cache (written back first), as after a reboot.
inline void evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::fdatasync(fd) == 0);
  REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
  ::close(fd);
}

// Reads the whole file through the page cache, which then holds it (as after a first load).
inline void read_into_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  std::vector<char> buf(1 << 16);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
}

// The share of the file in the page cache, as DirectIo::kAuto sees it (-1: unknown).
inline double cached(const File& f) {
  return io::cached_fraction(*f.reader->source(), {&io::kWholeFile, 1}).value_or(-1);
}

// cached(f) as kernels without cachestat(2) (before Linux 6.5) answer it: mincore(2), asked
// `window` bytes of the file at a time.
inline double cached_by_mincore(const File& f, uint64_t window = io::kMincoreWindowBytes) {
  io::set_cached_fraction_by_mincore_for_testing(window);
  const double c = cached(f);
  io::set_cached_fraction_by_mincore_for_testing(0);
  return c;
}

// A load from a cold page cache (DirectIo::kAuto reads a warm file buffered: see the test of
// that below), through the host stand-in engine.
inline DeviceStats load(const File& f, Load& l, DeviceOptions o, Status* status = nullptr) {
  evict(f.path);
  if (o.direct_io == DirectIo::kAuto && cached(f) >= 0.5) {
    // (tmpfs keeps every page: there Auto reads buffered, which its own test checks.)
    MESSAGE("the page cache still holds " << cached(f) * 100 << "% of " << f.path
                                          << " after POSIX_FADV_DONTNEED");
  }
  DeviceStats stats;
  o.stats = &stats;
  HostCopyEngine engine;
  Status st = read_many_staged(*f.reader, l.reqs, engine, o);
  check_clean(engine, o.staging_bytes);
  if (status != nullptr) {
    *status = st;
  } else {
    REQUIRE_MESSAGE(st.ok(), st.to_string());
  }
  return stats;
}

}  // namespace jtree::testing::raw_files
