// Tests of the storage layer: the local-file and in-memory Sources, the local-file Sinks, the
// default Source/Sink methods and the dispatch by path or URL.
#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "jtree/io.h"

namespace jtree {
namespace {

using Bytes = std::vector<std::byte>;

Bytes random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Bytes out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
  return out;
}

Bytes text_bytes(std::string_view s) {
  Bytes out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

void write_file(const std::string& path, const Bytes& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!bytes.empty()) REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  REQUIRE(std::fclose(f) == 0);
}

Bytes read_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  Bytes out;
  std::byte buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  std::fclose(f);
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

mode_t mode_of(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Names in a directory, sorted, without "." and "..".
std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A fresh directory, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != 0 ? base : "/tmp") +
                       "/jtree-io-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A 64 KiB tmpfs mounted over a directory, to make writes fail with ENOSPC for real. Needs
// root (CAP_SYS_ADMIN); ok() is false where mounting is not allowed.
class SmallTmpfs {
 public:
  explicit SmallTmpfs(const std::string& dir) : dir_(dir) {
    mounted_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=64k") == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool ok() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

// Runs fn on a thread whose file-system uid is "nobody". setfsuid() is per thread on Linux
// (the raw system call; glibc's setuid() would change every thread), and moving root's fsuid
// away from 0 drops the capabilities that bypass permission checks, so fn sees EACCES where
// an unprivileged user would. Without root, fn runs as the current (unprivileged) user.
template <typename Fn>
void run_without_privileges(Fn fn) {
  if (::geteuid() != 0) {
    fn();
    return;
  }
  std::thread t([&] {
    ::syscall(SYS_setfsuid, 65534);
    fn();
  });
  t.join();
}

std::shared_ptr<Source> open_or_die(const std::string& path, bool use_mmap = true) {
  auto r = open_file_source(path, use_mmap);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return *r;
}

std::unique_ptr<Sink> create_or_die(const std::string& path, const SinkOptions& options = {}) {
  auto r = create_file_sink(path, options);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return std::move(*r);
}

std::unique_ptr<Sink> append_or_die(const std::string& path, uint64_t keep, bool sync = true) {
  auto r = open_file_append_sink(path, keep, sync);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  return std::move(*r);
}

Status read_one(Source& src, uint64_t offset, std::span<std::byte> dst) {
  ReadRange r{offset, dst};
  return src.read(std::span<const ReadRange>(&r, 1));
}

Bytes slice(const Bytes& b, uint64_t offset, uint64_t len) {
  return Bytes(b.begin() + static_cast<ptrdiff_t>(offset),
               b.begin() + static_cast<ptrdiff_t>(offset + len));
}

// A Source that counts read() calls, over another Source (for the default read_head_tail).
class CountingSource final : public Source {
 public:
  explicit CountingSource(std::shared_ptr<Source> inner) : inner_(std::move(inner)) {}
  const std::string& name() const override { return inner_->name(); }
  Result<uint64_t> size() override { return inner_->size(); }
  Status read(std::span<const ReadRange> ranges) override {
    ++read_calls;
    ranges_read += ranges.size();
    return inner_->read(ranges);
  }
  IoStats stats() const override { return inner_->stats(); }
  int read_calls = 0;
  size_t ranges_read = 0;

 private:
  std::shared_ptr<Source> inner_;
};

// ---- file source ---------------------------------------------------------------------------

TEST_CASE("file source: random ranges read the file's bytes") {
  TempDir dir;
  const std::string path = dir.file("data.bin");
  const Bytes bytes = random_bytes((3 << 20) + 123, 1);
  write_file(path, bytes);
  for (bool use_mmap : {true, false}) {
    CAPTURE(use_mmap);
    auto src = open_or_die(path, use_mmap);
    CHECK(src->name() == path);
    auto size = src->size();
    REQUIRE(size.ok());
    CHECK(*size == bytes.size());

    std::mt19937_64 rng(2);
    for (int round = 0; round < 200; ++round) {
      // Several ranges per call, of all lengths from 0 to a few MiB, anywhere in the file.
      const size_t count = 1 + rng() % 5;
      std::vector<Bytes> buffers(count);
      std::vector<ReadRange> ranges(count);
      for (size_t i = 0; i < count; ++i) {
        const uint64_t offset = rng() % (bytes.size() + 1);
        const uint64_t max_len = bytes.size() - offset;
        const uint64_t len =
            rng() % 4 == 0 ? max_len : rng() % (std::min<uint64_t>(max_len, 70000) + 1);
        buffers[i].assign(len, std::byte{0xEE});
        ranges[i] = ReadRange{offset, buffers[i]};
      }
      REQUIRE(src->read(ranges).ok());
      for (size_t i = 0; i < count; ++i) {
        REQUIRE(buffers[i] == slice(bytes, ranges[i].offset, buffers[i].size()));
      }
    }
  }
}

TEST_CASE("file source: ranges past the end are IOError naming the path") {
  TempDir dir;
  const std::string path = dir.file("small.bin");
  const Bytes bytes = random_bytes(1000, 3);
  write_file(path, bytes);
  auto src = open_or_die(path);
  Bytes buf(16);
  struct Case {
    uint64_t offset;
    size_t len;
  };
  for (Case c : {Case{1000, 1}, Case{990, 11}, Case{1001, 0}, Case{0, 1001},
                 Case{UINT64_MAX - 4, 8}}) {
    CAPTURE(c.offset);
    CAPTURE(c.len);
    Bytes dst(c.len);
    Status st = read_one(*src, c.offset, dst);
    REQUIRE(st.is_io_error());
    CHECK(starts_with(st.message(), path + ": unexpected end of file at offset " +
                                        std::to_string(c.offset) + " (wanted " +
                                        std::to_string(c.len) + " bytes, file has 1000)"));
  }
  // The last byte and an empty range at the very end are fine.
  CHECK(read_one(*src, 999, std::span<std::byte>(buf.data(), 1)).ok());
  CHECK(buf[0] == bytes[999]);
  CHECK(read_one(*src, 1000, {}).ok());
}

TEST_CASE("file source: a file truncated after opening gives IOError, not garbage") {
  TempDir dir;
  const std::string path = dir.file("shrinks.bin");
  write_file(path, random_bytes(10000, 4));
  auto src = open_or_die(path, /*use_mmap=*/false);
  REQUIRE(::truncate(path.c_str(), 100) == 0);
  Bytes dst(500);
  Status st = read_one(*src, 50, dst);
  REQUIRE(st.is_io_error());
  CHECK(starts_with(st.message(), path + ": unexpected end of file at offset 50"));
  CHECK(contains(st.message(), "file has 100)"));
}

TEST_CASE("file source: a missing file is NotFound") {
  TempDir dir;
  const std::string path = dir.file("missing.jtree");
  auto r = open_file_source(path);
  REQUIRE(!r.ok());
  CHECK(r.status().is_not_found());
  CHECK(r.status().message() == path + ": open: No such file or directory");
}

TEST_CASE("file source: directories and FIFOs are InvalidArgument") {
  TempDir dir;
  auto r = open_file_source(dir.path());
  REQUIRE(!r.ok());
  CHECK(r.status().is_invalid_argument());
  CHECK(r.status().message() == dir.path() + ": not a regular file");

  // Opening a FIFO must not wait for a writer. If it does, a writer is opened to release
  // it, so that the test fails instead of hanging.
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto pending = std::async(std::launch::async, [&] { return open_file_source(fifo); });
  const bool waited = pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready;
  if (waited) ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  CHECK_FALSE(waited);
  auto f = pending.get();
  REQUIRE(!f.ok());
  CHECK(f.status().is_invalid_argument());
  CHECK(f.status().message() == fifo + ": not a regular file");
}

TEST_CASE("file source: a file the user may not read is PermissionDenied") {
  TempDir dir;
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  const std::string path = dir.file("secret.bin");
  write_file(path, random_bytes(10, 5));
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  Status st;
  run_without_privileges([&] { st = open_file_source(path).status(); });
  CHECK(st.code() == StatusCode::kPermissionDenied);
  CHECK(st.message() == path + ": open: Permission denied");
}

TEST_CASE("file source: mapping() holds the file's bytes") {
  TempDir dir;
  const std::string path = dir.file("mapped.bin");
  const Bytes bytes = random_bytes(123457, 6);
  write_file(path, bytes);
  {
    auto src = open_or_die(path, true);
    auto map = src->mapping();
    REQUIRE(map.size() == bytes.size());
    CHECK(std::equal(map.begin(), map.end(), bytes.begin()));
  }
  CHECK(open_or_die(path, false)->mapping().empty());

  const std::string empty = dir.file("empty.bin");
  write_file(empty, {});
  auto src = open_or_die(empty, true);
  CHECK(src->mapping().empty());
  CHECK(*src->size() == 0);
  CHECK(read_one(*src, 0, {}).ok());
}

TEST_CASE("file source: stats count ranges and bytes") {
  TempDir dir;
  const std::string path = dir.file("stats.bin");
  write_file(path, random_bytes(5000, 7));
  auto src = open_or_die(path);
  CHECK(src->stats().read_requests == 0);
  Bytes a(100), b(2000), c(1);
  ReadRange ranges[] = {{0, a}, {1000, b}, {4999, c}};
  REQUIRE(src->read(ranges).ok());
  REQUIRE(read_one(*src, 10, a).ok());
  IoStats s = src->stats();
  CHECK(s.read_requests == 4);
  CHECK(s.bytes_read == 2201);
  CHECK(s.bytes_written == 0);
}

TEST_CASE("file source: concurrent reads from 8 threads") {
  TempDir dir;
  const std::string path = dir.file("shared.bin");
  const Bytes bytes = random_bytes(1 << 20, 8);
  write_file(path, bytes);
  auto src = open_or_die(path);
  std::atomic<int> mismatches{0};
  std::atomic<uint64_t> total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < 300; ++i) {
        const uint64_t offset = rng() % bytes.size();
        Bytes dst(rng() % (bytes.size() - offset) % 20000);
        if (!read_one(*src, offset, dst).ok() || dst != slice(bytes, offset, dst.size())) {
          ++mismatches;
        }
        total += dst.size();
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(mismatches == 0);
  CHECK(src->stats().read_requests == 8 * 300);
  CHECK(src->stats().bytes_read == total);
}

// ---- read_head_tail ------------------------------------------------------------------------

TEST_CASE("read_head_tail: objects smaller than, equal to and larger than head + tail") {
  TempDir dir;
  const uint64_t head = 100, tail = 300;
  for (uint64_t size : {0, 1, 50, 100, 250, 300, 399, 400, 401, 1000, 100000}) {
    CAPTURE(size);
    const Bytes bytes = random_bytes(size, static_cast<uint32_t>(size));
    const std::string path = dir.file("ht-" + std::to_string(size));
    write_file(path, bytes);
    for (int backend = 0; backend < 2; ++backend) {
      CAPTURE(backend);
      auto inner = backend == 0 ? open_or_die(path) : memory_source(bytes, "mem");
      CountingSource src(inner);
      auto ht = src.read_head_tail(head, tail);
      REQUIRE_MESSAGE(ht.ok(), ht.status().to_string());
      const uint64_t h = std::min(head, size), t = std::min(tail, size);
      CHECK(ht->size == size);
      CHECK(ht->head == slice(bytes, 0, h));
      CHECK(ht->tail == slice(bytes, size - t, t));
      // One read() call (none for an empty object), and no byte fetched twice.
      CHECK(src.read_calls == (size == 0 ? 0 : 1));
      CHECK(inner->stats().bytes_read == std::min(size, head + tail));
    }
  }
  // Zero head or zero tail.
  const Bytes bytes = random_bytes(1000, 9);
  CountingSource src(memory_source(bytes));
  auto ht = src.read_head_tail(0, 10);
  REQUIRE(ht.ok());
  CHECK(ht->head.empty());
  CHECK(ht->tail == slice(bytes, 990, 10));
  CHECK(src.ranges_read == 1);
  ht = src.read_head_tail(10, 0);
  REQUIRE(ht.ok());
  CHECK(ht->head == slice(bytes, 0, 10));
  CHECK(ht->tail.empty());
  // Sizes far beyond the object (no overflow in head + tail).
  ht = src.read_head_tail(UINT64_MAX, UINT64_MAX);
  REQUIRE(ht.ok());
  CHECK(ht->head == bytes);
  CHECK(ht->tail == bytes);
}

TEST_CASE("read_head_tail: errors from the backend come back") {
  TempDir dir;
  auto r = open_file_source(dir.file("nope"));
  CHECK(r.status().is_not_found());
  const std::string path = dir.file("shrinks");
  write_file(path, random_bytes(5000, 10));
  auto src = open_or_die(path, false);
  REQUIRE(::truncate(path.c_str(), 10) == 0);
  auto ht = src->read_head_tail(100, 100);
  REQUIRE(!ht.ok());
  CHECK(ht.status().is_io_error());
  CHECK(starts_with(ht.status().message(), path + ": "));
}

// ---- memory source -------------------------------------------------------------------------

TEST_CASE("memory source: reads, bounds, zero-copy mapping and stats") {
  const Bytes bytes = random_bytes(4096, 11);
  auto src = memory_source(bytes, "weights.bin");
  CHECK(src->name() == "weights.bin");
  CHECK(*src->size() == 4096);
  CHECK(memory_source({})->name() == "<memory>");

  Bytes a(10), b(4096);
  ReadRange ranges[] = {{4086, a}, {0, b}};
  REQUIRE(src->read(ranges).ok());
  CHECK(a == slice(bytes, 4086, 10));
  CHECK(b == bytes);

  Status st = read_one(*src, 4090, a);
  REQUIRE(st.is_io_error());
  CHECK(st.message() ==
        "weights.bin: unexpected end of file at offset 4090 (wanted 10 bytes, file has 4096)");
  CHECK(read_one(*src, UINT64_MAX, a).is_io_error());

  auto map = src->mapping();
  CHECK(map.size() == bytes.size());
  CHECK(std::equal(map.begin(), map.end(), bytes.begin()));
  CHECK(src->mapping().data() == map.data());  // the same bytes every time, never a copy

  IoStats s = src->stats();
  CHECK(s.read_requests == 2);
  CHECK(s.bytes_read == 4106);
}

TEST_CASE("memory source: concurrent reads") {
  const Bytes bytes = random_bytes(100000, 12);
  auto src = memory_source(bytes);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 500; ++i) {
        const uint64_t off = rng() % bytes.size();
        Bytes dst((bytes.size() - off) % 3000);
        if (!read_one(*src, off, dst).ok() || dst != slice(bytes, off, dst.size())) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(bad == 0);
  CHECK(src->stats().read_requests == 4000);
}

// ---- new-file sink -------------------------------------------------------------------------

// The temporary files of target `name` in `dir` (".name.tmp-" + 16 hex digits).
std::vector<std::string> temp_files(const TempDir& dir, const std::string& name) {
  std::vector<std::string> out;
  for (const std::string& f : list_dir(dir.path())) {
    if (starts_with(f, "." + name + ".tmp-")) out.push_back(f);
  }
  return out;
}

TEST_CASE("file sink: commits exactly the appended bytes, invisible until commit") {
  TempDir dir;
  const std::string path = dir.file("out.jtree");
  // Tiny, empty, just-below, exactly-at and far-above the 1 MiB buffer, in a mixed order.
  const size_t sizes[] = {1,         0,       7,         (1 << 20) - 1, 3,       1 << 20,
                          5 << 20,   17,      (1 << 20) + 1, 65536,     1000000, 2,
                          (1 << 20) - 5, 100};
  size_t total = 0;
  for (size_t s : sizes) total += s;
  const Bytes bytes = random_bytes(total, 13);

  auto sink = create_or_die(path);
  CHECK(sink->name() == path);
  CHECK(sink->position() == 0);
  CHECK_FALSE(sink->can_patch());
  size_t offset = 0;
  for (size_t s : sizes) {
    REQUIRE(sink->append(std::span(bytes).subspan(offset, s)).ok());
    offset += s;
    CHECK(sink->position() == offset);
  }
  REQUIRE(sink->sync().ok());

  // Before commit: the target does not exist, the data sits in one temporary file.
  CHECK_FALSE(exists(path));
  auto temps = temp_files(dir, "out.jtree");
  REQUIRE(temps.size() == 1);
  const std::string temp = temps[0];
  CHECK(temp.size() == std::string(".out.jtree.tmp-").size() + 16);
  CHECK(temp.find_first_not_of("0123456789abcdef", 15) == std::string::npos);
  CHECK(read_file(dir.file(temp)) == bytes);  // sync() flushed everything

  REQUIRE(sink->commit().ok());
  CHECK(read_file(path) == bytes);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"out.jtree"});
  CHECK(sink->stats().bytes_written == total);
  CHECK(sink->stats().write_requests > 0);
}

TEST_CASE("file sink: a replaced file is untouched until commit") {
  TempDir dir;
  const std::string path = dir.file("ckpt.jtree");
  const Bytes old_bytes = random_bytes(5000, 14);
  const Bytes new_bytes = random_bytes(3 << 20, 15);
  write_file(path, old_bytes);
  auto sink = create_or_die(path);
  REQUIRE(sink->append(new_bytes).ok());
  REQUIRE(sink->sync().ok());
  CHECK(read_file(path) == old_bytes);
  REQUIRE(sink->commit().ok());
  CHECK(read_file(path) == new_bytes);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"ckpt.jtree"});
}

TEST_CASE("file sink: abort and destruction remove the temporary file") {
  TempDir dir;
  const std::string path = dir.file("ckpt.jtree");
  const Bytes old_bytes = random_bytes(777, 16);
  write_file(path, old_bytes);
  const Bytes junk = random_bytes(2 << 20, 17);

  SUBCASE("abort") {
    auto sink = create_or_die(path);
    REQUIRE(sink->append(std::span(junk).first(10)).ok());
    REQUIRE(sink->append(junk).ok());
    CHECK(temp_files(dir, "ckpt.jtree").size() == 1);
    sink->abort();
    sink->abort();  // idempotent
    CHECK(temp_files(dir, "ckpt.jtree").empty());
    Status st = sink->append(junk);
    CHECK(st.is_invalid_argument());
    CHECK(st.message() == path + ": sink is closed");
    CHECK(sink->commit().is_invalid_argument());
    CHECK(sink->sync().is_invalid_argument());
  }
  SUBCASE("destruction") {
    auto sink = create_or_die(path);
    REQUIRE(sink->append(junk).ok());
    REQUIRE(sink->append(std::span(junk).first(5)).ok());
    sink.reset();
  }
  SUBCASE("destruction of a sink for a new name") {
    auto sink = create_or_die(dir.file("fresh.jtree"));
    REQUIRE(sink->append(junk).ok());
    sink.reset();
  }
  CHECK(read_file(path) == old_bytes);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"ckpt.jtree"});
}

TEST_CASE("file sink: temporary files of dead writers are removed, those of live ones kept") {
  TempDir dir;
  const std::string path = dir.file("ckpt.jtree");
  const std::string stale = ".ckpt.jtree.tmp-0123456789abcdef";
  const std::string stale_other = ".other.jtree.tmp-fedcba9876543210";
  // Names that are not temporary files of a jtree save, and things that are not files.
  const std::vector<std::string> not_temp = {".ckpt.jtree.tmp-0123", ".ckpt.jtree.tmp-0123456789ABCDEF",
                                             "ckpt.jtree.tmp-0123456789abcdef",
                                             ".ckpt.jtree.tmp-0123456789abcdefa", ".tmp-0123456789abcdef"};
  for (const std::string& n : not_temp) write_file(dir.file(n), random_bytes(10, 1));
  write_file(dir.file(stale), random_bytes(100, 2));
  write_file(dir.file(stale_other), random_bytes(100, 3));
  REQUIRE(::symlink(path.c_str(), dir.file(".ckpt.jtree.tmp-aaaaaaaaaaaaaaaa").c_str()) == 0);
  REQUIRE(::mkdir(dir.file(".ckpt.jtree.tmp-bbbbbbbbbbbbbbbb").c_str(), 0755) == 0);
  // One that another writer (here: another open file) holds locked is alive.
  const std::string held = ".ckpt.jtree.tmp-cccccccccccccccc";
  write_file(dir.file(held), random_bytes(100, 4));
  const int held_fd = ::open(dir.file(held).c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(held_fd >= 0);
  REQUIRE(::flock(held_fd, LOCK_EX) == 0);

  // A live sink of this process: its lock keeps its file.
  auto live = create_or_die(path);
  CHECK(!exists(dir.file(stale)));  // the save removed the dead writer's file
  REQUIRE(live->append(random_bytes(1000, 5)).ok());
  const std::vector<std::string> live_temp = temp_files(dir, "ckpt.jtree");
  // "held", the live sink's, the link, the directory, and three of `not_temp`.
  CHECK(live_temp.size() == 7);

  auto removed = remove_stale_temp_files(path);
  REQUIRE(removed.ok());
  CHECK(*removed == 0);
  // A second save of the same target in this process keeps the first one's file too.
  auto second = create_or_die(path);
  REQUIRE(second->append(random_bytes(10, 6)).ok());
  REQUIRE(live->commit().ok());
  REQUIRE(second->commit().ok());
  CHECK(read_file(path).size() == 10);

  ::close(held_fd);  // the other writer died
  removed = remove_stale_temp_files(path);
  REQUIRE(removed.ok());
  CHECK(*removed == 1);
  CHECK(!exists(dir.file(held)));
  CHECK(exists(dir.file(stale_other)));  // another target's
  removed = remove_stale_temp_files(dir.path());  // a directory: every target's
  REQUIRE(removed.ok());
  CHECK(*removed == 1);
  CHECK(!exists(dir.file(stale_other)));
  std::vector<std::string> want = not_temp;
  want.push_back("ckpt.jtree");
  want.push_back(".ckpt.jtree.tmp-aaaaaaaaaaaaaaaa");
  want.push_back(".ckpt.jtree.tmp-bbbbbbbbbbbbbbbb");
  std::sort(want.begin(), want.end());
  CHECK(list_dir(dir.path()) == want);

  CHECK(remove_stale_temp_files("file://" + dir.path() + "/ckpt.jtree").ok());
  CHECK(remove_stale_temp_files(dir.file("missing/ckpt.jtree")).status().is_not_found());
  CHECK(remove_stale_temp_files("https://example.com/ckpt.jtree").status().is_not_supported());
}

TEST_CASE("file sink: saves to one target run beside cleaners and never lose their file") {
  TempDir dir;
  const std::string path = dir.file("busy.jtree");
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread cleaner([&] {
    while (!stop.load()) {
      if (!remove_stale_temp_files(path).ok()) ++failures;
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        auto sink = create_file_sink(path);
        if (!sink.ok()) {
          ++failures;
          continue;
        }
        const Bytes bytes = random_bytes(100 + static_cast<size_t>(i), static_cast<uint32_t>(t));
        if (!(*sink)->append(bytes).ok() || !(*sink)->commit().ok()) ++failures;
      }
    });
  }
  for (auto& w : writers) w.join();
  stop = true;
  cleaner.join();
  CHECK(failures.load() == 0);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"busy.jtree"});
}

TEST_CASE("file sink: a committed sink is closed, and abort() no longer removes anything") {
  TempDir dir;
  const std::string path = dir.file("done.jtree");
  const Bytes bytes = random_bytes(100, 18);
  auto sink = create_or_die(path);
  REQUIRE(sink->append(bytes).ok());
  REQUIRE(sink->commit().ok());
  CHECK(sink->append(bytes).message() == path + ": sink is closed");
  CHECK(sink->commit().is_invalid_argument());
  sink->abort();
  sink.reset();
  CHECK(read_file(path) == bytes);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"done.jtree"});
}

TEST_CASE("file sink: overwrite=false refuses an existing file") {
  TempDir dir;
  const std::string path = dir.file("keep.jtree");
  const Bytes old_bytes = random_bytes(321, 19);
  write_file(path, old_bytes);
  SinkOptions options;
  options.overwrite = false;
  auto r = create_file_sink(path, options);
  REQUIRE(!r.ok());
  CHECK(r.status().code() == StatusCode::kAlreadyExists);
  CHECK(starts_with(r.status().message(), path + ": "));
  CHECK(read_file(path) == old_bytes);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"keep.jtree"});
}

TEST_CASE("file sink: overwrite=false never replaces a file that appears before commit") {
  TempDir dir;
  const std::string path = dir.file("race.jtree");
  SinkOptions options;
  options.overwrite = false;
  for (bool sync : {true, false}) {
    options.sync = sync;
    auto sink = create_or_die(path, options);
    REQUIRE(sink->append(random_bytes(4000, 20)).ok());
    const Bytes theirs = random_bytes(99, 21);
    write_file(path, theirs);  // another writer wins the race
    Status st = sink->commit();
    CHECK(st.code() == StatusCode::kAlreadyExists);
    CHECK(starts_with(st.message(), path + ": "));
    CHECK(read_file(path) == theirs);
    CHECK(list_dir(dir.path()) == std::vector<std::string>{"race.jtree"});
    REQUIRE(::unlink(path.c_str()) == 0);
  }
  // Without the race, overwrite=false commits normally.
  auto sink = create_or_die(path, options);
  REQUIRE(sink->append(text_bytes("hello")).ok());
  REQUIRE(sink->commit().ok());
  CHECK(read_file(path) == text_bytes("hello"));
}

TEST_CASE("file sink: a replaced file keeps its permission bits") {
  TempDir dir;
  for (mode_t mode : {mode_t{0600}, mode_t{0751}, mode_t{0640}}) {
    CAPTURE(mode);
    const std::string path = dir.file("perm.jtree");
    write_file(path, random_bytes(10, 22));
    REQUIRE(::chmod(path.c_str(), mode) == 0);
    auto sink = create_or_die(path);
    REQUIRE(sink->append(random_bytes(10, 23)).ok());
    REQUIRE(sink->commit().ok());
    CHECK(mode_of(path) == mode);
  }
  // A new file gets 0666 less the umask.
  const mode_t umask_now = ::umask(0);
  ::umask(umask_now);
  auto sink = create_or_die(dir.file("new.jtree"));
  REQUIRE(sink->commit().ok());
  CHECK(mode_of(dir.file("new.jtree")) == (0666 & ~umask_now));
  CHECK(read_file(dir.file("new.jtree")).empty());
}

TEST_CASE("file sink: bad targets") {
  TempDir dir;
  const std::string missing = dir.file("no/such/dir/x.jtree");
  auto r = create_file_sink(missing);
  REQUIRE(!r.ok());
  CHECK(r.status().is_not_found());
  CHECK(starts_with(r.status().message(), missing + ": "));
  CHECK(contains(r.status().message(), "No such file or directory"));

  auto d = create_file_sink(dir.path());
  CHECK(d.status().is_invalid_argument());
  CHECK(create_file_sink(dir.path() + "/").status().is_invalid_argument());
  CHECK(create_file_sink("").status().is_invalid_argument());
  CHECK(list_dir(dir.path()).empty());
}

TEST_CASE("file sink: a directory the user may not write is PermissionDenied") {
  TempDir dir;
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  const std::string path = dir.file("x.jtree");
  Status st;
  run_without_privileges([&] { st = create_file_sink(path).status(); });
  CHECK(st.code() == StatusCode::kPermissionDenied);
  CHECK(starts_with(st.message(), path + ": "));
  CHECK(contains(st.message(), "Permission denied"));
  CHECK(list_dir(dir.path()).empty());
}

TEST_CASE("file sink: a bare file name is written in the current directory") {
  TempDir dir;
  char cwd[4096];
  REQUIRE(::getcwd(cwd, sizeof cwd) != nullptr);
  REQUIRE(::chdir(dir.path().c_str()) == 0);
  auto r = create_file_sink("bare.jtree");
  Status st = r.ok() ? (*r)->append(text_bytes("abc")) : r.status();
  if (st.ok()) st = (*r)->commit();
  REQUIRE(::chdir(cwd) == 0);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(read_file(dir.file("bare.jtree")) == text_bytes("abc"));
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"bare.jtree"});
}

TEST_CASE("file sink: sync() with and without fsync, and no patching") {
  TempDir dir;
  for (bool sync : {true, false}) {
    SinkOptions options;
    options.sync = sync;
    const std::string path = dir.file(sync ? "s1" : "s0");
    auto sink = create_or_die(path, options);
    REQUIRE(sink->append(text_bytes("abc")).ok());
    REQUIRE(sink->sync().ok());
    CHECK(sink->patch(0, text_bytes("x")).is_not_supported());
    REQUIRE(sink->append(text_bytes("def")).ok());
    REQUIRE(sink->commit().ok());
    CHECK(read_file(path) == text_bytes("abcdef"));
  }
}

TEST_CASE("file sink: a full disk (ENOSPC) fails cleanly") {
  TempDir dir;
  const std::string mnt = dir.file("mnt");
  REQUIRE(::mkdir(mnt.c_str(), 0755) == 0);
  SmallTmpfs fs(mnt);
  if (!fs.ok()) {
    MESSAGE("skipped: cannot mount a 64 KiB tmpfs (" << fs.error() << "); ENOSPC untested");
    return;
  }
  const std::string path = mnt + "/full.jtree";
  const Bytes old_bytes = random_bytes(1000, 24);
  write_file(path, old_bytes);

  SUBCASE("a large append fails at once") {
    auto sink = create_or_die(path);
    Status st = sink->append(random_bytes(2 << 20, 25));
    REQUIRE(st.is_io_error());
    CHECK(st.message() == path + ": write: No space left on device");
    // The error sticks: the file now has a hole, so neither appends nor commit may go on.
    CHECK(sink->append(text_bytes("x")).is_io_error());
    CHECK(sink->commit().is_io_error());
  }
  SUBCASE("small appends fail in commit") {
    auto sink = create_or_die(path);
    const Bytes chunk = random_bytes(10000, 26);
    for (int i = 0; i < 20; ++i) REQUIRE(sink->append(chunk).ok());  // buffered
    Status st = sink->commit();
    REQUIRE(st.is_io_error());
    CHECK(contains(st.message(), "No space left on device"));
    CHECK(sink->append(chunk).is_invalid_argument());
  }
  SUBCASE("append sink: abort restores the file") {
    auto sink = append_or_die(path, old_bytes.size());
    const Bytes chunk = random_bytes(30000, 27);
    Status st;
    for (int i = 0; i < 100 && st.ok(); ++i) st = sink->append(chunk);
    if (st.ok()) st = sink->commit();
    REQUIRE(st.is_io_error());
    CHECK(contains(st.message(), "No space left on device"));
  }
  CHECK(read_file(path) == old_bytes);
  CHECK(list_dir(mnt) == std::vector<std::string>{"full.jtree"});
}

// ---- append sink ---------------------------------------------------------------------------

TEST_CASE("append sink: drops a garbage tail and continues at keep_bytes") {
  TempDir dir;
  const std::string path = dir.file("gen.jtree");
  const Bytes committed = random_bytes(1000, 30);
  Bytes file = committed;
  const Bytes garbage = random_bytes(500, 31);
  file.insert(file.end(), garbage.begin(), garbage.end());
  write_file(path, file);

  auto sink = append_or_die(path, committed.size());
  CHECK(sink->position() == 1000);
  CHECK(sink->can_patch());
  CHECK(read_file(path) == committed);  // truncated at open
  const Bytes more = random_bytes(50, 32);
  REQUIRE(sink->append(more).ok());
  CHECK(sink->position() == 1050);
  REQUIRE(sink->commit().ok());
  Bytes expected = committed;
  expected.insert(expected.end(), more.begin(), more.end());
  CHECK(read_file(path) == expected);
  CHECK(sink->append(more).message() == path + ": sink is closed");
  sink->abort();  // after commit: nothing happens
  CHECK(read_file(path) == expected);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"gen.jtree"});
}

TEST_CASE("append sink: append + patch + commit") {
  TempDir dir;
  const std::string path = dir.file("gen.jtree");
  const Bytes committed = random_bytes(4096, 33);
  write_file(path, committed);
  for (bool sync : {true, false}) {
    CAPTURE(sync);
    write_file(path, committed);
    auto sink = append_or_die(path, committed.size(), sync);
    Bytes expected = committed;
    auto add = [&](const Bytes& b) {
      REQUIRE(sink->append(b).ok());
      expected.insert(expected.end(), b.begin(), b.end());
      CHECK(sink->position() == expected.size());
    };
    auto patch = [&](uint64_t offset, const Bytes& b) {
      REQUIRE(sink->patch(offset, b).ok());
      std::copy(b.begin(), b.end(), expected.begin() + static_cast<ptrdiff_t>(offset));
      CHECK(sink->position() == expected.size());
    };
    add(random_bytes(100, 34));             // buffered
    patch(4096 + 10, text_bytes("PATCH"));  // inside the still-buffered bytes
    add(random_bytes(3 << 20, 35));         // direct
    add(random_bytes(7, 36));
    patch(4090, random_bytes(20, 37));          // across the committed/appended boundary
    patch(expected.size() - 7, text_bytes("END"));
    patch(expected.size() - 2, text_bytes("!!"));  // ends exactly at position()
    patch(expected.size(), {});                    // an empty patch at position()
    patch(0, text_bytes("HEAD"));                  // committed bytes (the preamble)
    REQUIRE(sink->sync().ok());
    REQUIRE(sink->commit().ok());
    CHECK(read_file(path) == expected);
    CHECK(sink->patch(0, text_bytes("x")).is_invalid_argument());
  }
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"gen.jtree"});
}

TEST_CASE("append sink: patches beyond position() are refused") {
  TempDir dir;
  const std::string path = dir.file("gen.jtree");
  write_file(path, random_bytes(100, 38));
  auto sink = append_or_die(path, 100);
  REQUIRE(sink->append(random_bytes(10, 39)).ok());
  Status st = sink->patch(105, random_bytes(6, 40));
  CHECK(st.is_invalid_argument());
  CHECK(starts_with(st.message(), path + ": "));
  CHECK(sink->patch(111, {}).is_invalid_argument());
  CHECK(sink->patch(UINT64_MAX, text_bytes("x")).is_invalid_argument());
  CHECK(sink->patch(UINT64_MAX - 1, random_bytes(5, 41)).is_invalid_argument());
  // A refused patch does not poison the sink.
  CHECK(sink->patch(104, random_bytes(6, 42)).ok());
  CHECK(sink->commit().ok());
  CHECK(read_file(path).size() == 110);
}

TEST_CASE("append sink: abort and destruction restore the committed bytes") {
  TempDir dir;
  const std::string path = dir.file("gen.jtree");
  const Bytes committed = random_bytes(3000, 43);
  write_file(path, committed);
  SUBCASE("abort") {
    auto sink = append_or_die(path, committed.size());
    REQUIRE(sink->append(random_bytes(2 << 20, 44)).ok());  // written, not just buffered
    REQUIRE(sink->append(random_bytes(10, 45)).ok());
    REQUIRE(sink->patch(3000, random_bytes(100, 46)).ok());
    REQUIRE(sink->sync().ok());
    CHECK(read_file(path).size() == 3000 + (2 << 20) + 10);
    sink->abort();
    sink->abort();
    CHECK(sink->append(committed).is_invalid_argument());
    CHECK(sink->commit().is_invalid_argument());
  }
  SUBCASE("destruction") {
    auto sink = append_or_die(path, committed.size(), /*sync=*/false);
    REQUIRE(sink->append(random_bytes(3 << 20, 47)).ok());
    sink.reset();
  }
  CHECK(read_file(path) == committed);
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"gen.jtree"});
}

TEST_CASE("append sink: a short file, a missing file, a directory") {
  TempDir dir;
  const std::string path = dir.file("short.jtree");
  const Bytes bytes = random_bytes(100, 48);
  write_file(path, bytes);
  auto r = open_file_append_sink(path, 101);
  REQUIRE(!r.ok());
  CHECK(r.status().is_corruption());
  CHECK(starts_with(r.status().message(), path + ": file is shorter than its committed size"));
  CHECK(read_file(path) == bytes);

  const std::string missing = dir.file("missing.jtree");
  auto m = open_file_append_sink(missing, 0);
  CHECK(m.status().is_not_found());
  CHECK(m.status().message() == missing + ": open: No such file or directory");
  CHECK(open_file_append_sink(dir.path(), 0).status().code() != StatusCode::kOk);
  CHECK_FALSE(exists(missing));
}

// ---- dispatch ------------------------------------------------------------------------------

TEST_CASE("dispatch: is_local_path") {
  std::string local;
  CHECK(is_local_path("ckpt.jtree", &local));
  CHECK(local == "ckpt.jtree");
  CHECK(is_local_path("/abs/ckpt.jtree", &local));
  CHECK(local == "/abs/ckpt.jtree");
  CHECK(is_local_path("file:///abs/path", &local));
  CHECK(local == "/abs/path");
  CHECK(is_local_path("FILE:///abs/path", &local));
  CHECK(local == "/abs/path");
  CHECK(is_local_path("file://localhost/abs/path", &local));
  CHECK(local == "/abs/path");
  CHECK(is_local_path("file://rel/path", &local));
  CHECK(local == "rel/path");
  CHECK(is_local_path("file:///tmp/my%20ckpt%C3%A9.jtree", &local));  // pathlib's as_uri()
  CHECK(local == "/tmp/my ckpt\xC3\xA9.jtree");
  CHECK(is_local_path("file:///a%2", &local));  // a malformed escape stays as written
  CHECK(local == "/a%2");
  CHECK(is_local_path("ckpt%20x.jtree", &local));  // plain paths are not decoded
  CHECK(local == "ckpt%20x.jtree");
  CHECK(is_local_path("runs/a://b", &local));  // not a scheme before "://"
  CHECK(local == "runs/a://b");
  CHECK(is_local_path("", &local));
  CHECK(is_local_path("x.jtree"));  // local_path may be null
  CHECK_FALSE(is_local_path("http://host/x.jtree", &local));
  CHECK_FALSE(is_local_path("https://host/x.jtree"));
  CHECK_FALSE(is_local_path("s3://bucket/x.jtree"));
  CHECK_FALSE(is_local_path("gs+x.y-z://bucket/x.jtree"));
}

TEST_CASE("dispatch: open_source and create_sink") {
  TempDir dir;
  const std::string path = dir.file("d.jtree");
  const Bytes bytes = random_bytes(5000, 49);

  {
    auto sink = create_sink("file://" + path);
    REQUIRE_MESSAGE(sink.ok(), sink.status().to_string());
    REQUIRE((*sink)->append(bytes).ok());
    REQUIRE((*sink)->commit().ok());
  }
  CHECK(read_file(path) == bytes);

  for (const std::string& name : {path, "file://" + path}) {
    for (bool use_mmap : {true, false}) {
      OpenOptions options;
      options.use_mmap = use_mmap;
      auto src = open_source(name, options);
      REQUIRE_MESSAGE(src.ok(), src.status().to_string());
      CHECK((*src)->name() == path);
      CHECK((*src)->mapping().empty() == !use_mmap);
      Bytes dst(bytes.size());
      REQUIRE(read_one(**src, 0, dst).ok());
      CHECK(dst == bytes);
    }
  }
  CHECK(open_source(dir.file("nope")).status().is_not_found());

  SinkOptions no_overwrite;
  no_overwrite.overwrite = false;
  CHECK(create_sink(path, no_overwrite).status().code() == StatusCode::kAlreadyExists);

  for (std::string url : {"http://host/x.jtree", "https://host/x.jtree", "s3://b/x.jtree",
                          "HTTPS://host/x.jtree"}) {
    CAPTURE(url);
    auto s = open_source(url);
    CHECK(s.status().is_not_supported());
    CHECK(s.status().message() == url + ": this build has no http(s)/s3 backend (JTREE_WITH_REMOTE=OFF)");
    auto k = create_sink(url);
    CHECK(k.status().is_not_supported());
    CHECK(k.status().message() == url + ": this build has no http(s)/s3 backend (JTREE_WITH_REMOTE=OFF)");
  }
  auto ftp = open_source("ftp://host/x.jtree");
  CHECK(ftp.status().is_not_supported());
  CHECK(ftp.status().message() ==
        "ftp://host/x.jtree: unsupported URL scheme \"ftp\" (this build reads local paths, "
        "file://)");
  CHECK(create_sink("gs://b/x").status().is_not_supported());
  CHECK(list_dir(dir.path()) == std::vector<std::string>{"d.jtree"});
}

// ---- defaults ------------------------------------------------------------------------------

TEST_CASE("Sink::patch defaults to NotSupported") {
  class NullSink final : public Sink {
   public:
    const std::string& name() const override { return name_; }
    uint64_t position() const override { return 0; }
    Status append(std::span<const std::byte>) override { return Status::success(); }
    Status sync() override { return Status::success(); }
    Status commit() override { return Status::success(); }
    void abort() noexcept override {}
    IoStats stats() const override { return {}; }

   private:
    std::string name_ = "null-sink";
  };
  NullSink sink;
  CHECK_FALSE(sink.can_patch());
  Status st = sink.patch(0, {});
  CHECK(st.is_not_supported());
  CHECK(starts_with(st.message(), "null-sink: "));
}

}  // namespace
}  // namespace jtree
