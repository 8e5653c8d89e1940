// The local-file Source: pread() for every read, plus an optional copy-on-write mapping of the
// whole file from which the reader hands out raw leaves without copying (Reader::mapped_leaf),
// and O_DIRECT reads into a caller's aligned buffer through a second descriptor opened on
// first use (io/direct_read.h: loads to a device read raw chunks so into pinned memory).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/direct_read.h"
#include "io/posix_file.h"
#include "jtree/io.h"

namespace jtree {
namespace {

std::atomic<bool> g_refuse_direct_open{false};   // io::set_refuse_direct_open_for_testing
std::atomic<bool> g_refuse_direct_reads{false};  // io::set_refuse_direct_reads_for_testing
// io::set_cached_fraction_by_mincore_for_testing: 0, or the mincore window that replaces
// cachestat.
std::atomic<uint64_t> g_mincore_window{0};
// io::cached_fraction_pages_asked_for_testing: the pages cached_fraction asked about.
std::atomic<uint64_t> g_pages_asked{0};

// Where the kernel does not report O_DIRECT's alignment (statx STATX_DIOALIGN, Linux 6.1+),
// 4096 is what every common file system and block device accepts (logical blocks are 512 or
// 4096 bytes).
constexpr uint64_t kDefaultDirectAlign = 4096;

bool power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// A private (copy-on-write) mapping of a whole file, unmapped on destruction.
class Mapping final : public MappedFile {
 public:
  Mapping(void* addr, size_t length) : addr_(addr), length_(length) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() override { ::munmap(addr_, length_); }
  std::span<std::byte> bytes() const override {
    return {static_cast<std::byte*>(addr_), length_};
  }

 private:
  void* const addr_;
  const size_t length_;
};

// A private mapping of part of a file: `length` bytes mapped from a page boundary, of which
// bytes() is the `view` range the caller asked for.
class RangeMapping final : public MappedFile {
 public:
  RangeMapping(void* addr, size_t length, std::span<std::byte> view)
      : addr_(addr), length_(length), view_(view) {}
  RangeMapping(const RangeMapping&) = delete;
  RangeMapping& operator=(const RangeMapping&) = delete;
  ~RangeMapping() override { ::munmap(addr_, length_); }
  std::span<std::byte> bytes() const override { return view_; }

 private:
  void* const addr_;
  const size_t length_;
  const std::span<std::byte> view_;
};

// Maps the file, or returns null: the mapping is an optimization, reads work without it (mmap
// fails on some file systems, or the address space may be short).
// MAP_PRIVATE with PROT_WRITE: arrays handed out over the mapping (Reader::mapped_leaf) are
// writable like any loaded array, and writes stay in this process. MAP_NORESERVE: no swap is
// reserved for pages that may be written (most never are), so a mapping larger than memory
// is not refused by the kernel's overcommit heuristic.
std::shared_ptr<const Mapping> map_file(int fd, uint64_t size) {
  if (size == 0 || size > SIZE_MAX) return nullptr;  // mmap rejects a length of 0
  void* addr = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_NORESERVE, fd, 0);
  if (addr == MAP_FAILED) return nullptr;
  return std::make_shared<const Mapping>(addr, static_cast<size_t>(size));
}

class FileSource final : public Source {
 public:
  FileSource(std::string path, UniqueFd fd, uint64_t size,
             std::shared_ptr<const Mapping> mapping)
      : path_(std::move(path)), fd_(std::move(fd)), size_(size), mapping_(std::move(mapping)) {}

  const std::string& name() const override { return path_; }
  // The object is immutable while open, so the size seen at open time stands.
  Result<uint64_t> size() override { return size_; }

  Status read(std::span<const ReadRange> ranges) override {
    for (const ReadRange& r : ranges) JTREE_RETURN_IF_ERROR(read_range(r));
    return Status::success();
  }

  std::span<const std::byte> mapping() const override {
    return mapping_ ? std::span<const std::byte>(mapping_->bytes()) : std::span<const std::byte>();
  }
  std::shared_ptr<const MappedFile> mapped_file() const override { return mapping_; }
  // Flags as map_file's (see there); offered only where the file was opened with use_mmap.
  std::shared_ptr<const MappedFile> map_range(uint64_t offset, uint64_t size) const override {
    if (!mapping_ || size == 0 || offset > size_ || size > size_ - offset) return nullptr;
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t start = offset & ~(page - 1);
    const uint64_t length = offset + size - start;
    if (length > SIZE_MAX) return nullptr;
    void* addr = ::mmap(nullptr, static_cast<size_t>(length), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_NORESERVE, fd_.get(), static_cast<off_t>(start));
    if (addr == MAP_FAILED) return nullptr;
    const std::span<std::byte> view(static_cast<std::byte*>(addr) + (offset - start),
                                    static_cast<size_t>(size));
    return std::make_shared<const RangeMapping>(addr, static_cast<size_t>(length), view);
  }

  // A shared, read-only mapping of the whole file (io::map_shared_read_only), whatever
  // use_mmap said; null where mmap fails.
  std::shared_ptr<const MappedFile> map_shared_read_only() const {
    if (size_ == 0 || size_ > SIZE_MAX) return nullptr;
    void* addr = ::mmap(nullptr, static_cast<size_t>(size_), PROT_READ, MAP_SHARED, fd_.get(), 0);
    if (addr == MAP_FAILED) return nullptr;
    return std::make_shared<const Mapping>(addr, static_cast<size_t>(size_));
  }

  // O_DIRECT (io/direct_read.h). The descriptor is opened once, by whichever thread asks
  // first; afterwards direct_ and direct_fd_ are only read.
  const io::DirectReadSupport& direct_support() const {
    std::call_once(direct_once_, [this] { open_direct(); });
    return direct_;
  }

  // The share of the pages of `extents` in the page cache (io::cached_fraction): cachestat(2)
  // (Linux 6.5+) per extent, else mincore(2) over mappings of them; nullopt when neither
  // answers.
  std::optional<double> cached_fraction(std::span<const io::FileExtent> extents) const {
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    uint64_t pages = 0, resident = 0;
    const uint64_t forced_window = g_mincore_window.load(std::memory_order_relaxed);
    bool by_cachestat = forced_window == 0;
    for (const io::FileExtent& e : extents) {
      if (e.offset >= size_ || e.size == 0) continue;
      // Whole pages: [first, last) of the file's pages that hold bytes of the extent.
      const uint64_t first = e.offset / page;
      const uint64_t last = (std::min(size_, e.offset + std::min(e.size, size_ - e.offset)) +
                             page - 1) / page;
      pages += last - first;
      g_pages_asked.fetch_add(last - first, std::memory_order_relaxed);
      std::optional<uint64_t> got;
      if (by_cachestat) {
        got = cachestat_pages(first * page, (last - first) * page);
        by_cachestat = got.has_value();  // (a kernel without it: mincore from here on)
      }
      if (!got) {
        const uint64_t window = forced_window != 0 ? forced_window : io::kMincoreWindowBytes;
        got = resident_pages(page, first, last, window / page + (window % page != 0 ? 1 : 0));
      }
      if (!got) return std::nullopt;
      resident += std::min(*got, last - first);
    }
    if (pages == 0) return 1.0;
    return static_cast<double>(resident) / static_cast<double>(pages);
  }

  // The pages of [offset, offset + len) in the page cache by cachestat(2); nullopt where the
  // kernel lacks it (before 6.5).
  std::optional<uint64_t> cachestat_pages(uint64_t offset, uint64_t len) const {
    // (The kernel's uapi structs, spelled out: Debian 12's headers predate cachestat.)
    struct CachestatRange {
      uint64_t off, len;
    } range{offset, len};
    struct Cachestat {
      uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
    } cs{};
    constexpr long kSysCachestat = 451;  // the same number on every architecture
    if (::syscall(kSysCachestat, fd_.get(), &range, &cs, 0) != 0) return std::nullopt;
    return cs.nr_cache;
  }

  // The file's pages [first, last) that mincore(2) finds resident, asked `window_pages` pages
  // at a time (a mapping of that much and a vector of one byte per page, reused), so that
  // the memory this takes does not grow with the extent.
  std::optional<uint64_t> resident_pages(uint64_t page, uint64_t first, uint64_t last,
                                         uint64_t window_pages) const {
    std::vector<unsigned char> resident(static_cast<size_t>(std::min(window_pages, last - first)));
    uint64_t n = 0;
    for (uint64_t p = first; p < last; p += window_pages) {
      const uint64_t count = std::min(window_pages, last - p);
      const uint64_t off = p * page;
      const size_t len = static_cast<size_t>(std::min(count * page, size_ - off));
      void* addr = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd_.get(), static_cast<off_t>(off));
      if (addr == MAP_FAILED) return std::nullopt;
      const int rc = ::mincore(addr, len, resident.data());
      ::munmap(addr, len);
      if (rc != 0) return std::nullopt;
      // (Only this window's entries: the last window is shorter, its tail holds stale ones.)
      const size_t used = static_cast<size_t>((len + page - 1) / page);
      for (size_t i = 0; i < used; ++i) n += resident[i] & 1;
    }
    return n;
  }

  Result<uint64_t> read_direct(uint64_t offset, std::span<std::byte> dst) const {
    const io::DirectReadSupport& s = direct_support();
    if (!s.available) return Status::not_supported(path_ + ": O_DIRECT read: " + s.reason);
    const uint64_t len = dst.size();
    if (offset % s.offset_align != 0 || len % s.offset_align != 0 ||
        reinterpret_cast<uintptr_t>(dst.data()) % s.memory_align != 0) {
      return Status::invalid_argument(path_ + ": O_DIRECT read of " + std::to_string(len) +
                                     " bytes at offset " + std::to_string(offset) +
                                     " is not aligned to " + std::to_string(s.offset_align) +
                                     " (memory: " + std::to_string(s.memory_align) + ")");
    }
    read_requests_.fetch_add(1, std::memory_order_relaxed);
    uint64_t done = 0;
    while (done < len) {
      const size_t want = static_cast<size_t>(std::min(len - done, kMaxIoBytes));
      ssize_t n = -1;
      if (g_refuse_direct_reads.load(std::memory_order_relaxed)) {
        errno = EINVAL;
      } else {
        n = ::pread(direct_fd_.get(), dst.data() + done, want, static_cast<off_t>(offset + done));
      }
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EINVAL) {
          // The kernel wants a bigger alignment than it reported (or than the 4096 assumed).
          return Status::not_supported(path_ + ": O_DIRECT read at offset " +
                                      std::to_string(offset + done) + " refused (EINVAL)");
        }
        return errno_status(path_, "O_DIRECT read at offset " + std::to_string(offset + done),
                            errno);
      }
      if (n == 0) break;  // the end of the file
      done += static_cast<uint64_t>(n);
      bytes_read_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
      // A short read ends at the end of the file (the next offset would not be aligned).
      if (static_cast<uint64_t>(n) % s.offset_align != 0) break;
    }
    return done;
  }

  IoStats stats() const override {
    IoStats s;
    s.read_requests = read_requests_.load(std::memory_order_relaxed);
    s.bytes_read = bytes_read_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  // pread() rather than a copy from the mapping: a copy takes a page fault on the first touch
  // of every page, which makes it slower than pread() from the page cache.
  Status read_range(const ReadRange& r) {
    const uint64_t len = r.dst.size();
    if (r.offset > size_ || len > size_ - r.offset) return eof_error(r.offset, len, size_);
    read_requests_.fetch_add(1, std::memory_order_relaxed);
    uint64_t done = 0;
    while (done < len) {
      const size_t want = static_cast<size_t>(std::min(len - done, kMaxIoBytes));
      const ssize_t n =
          ::pread(fd_.get(), r.dst.data() + done, want, static_cast<off_t>(r.offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno_status(path_, "read at offset " + std::to_string(r.offset + done), errno);
      }
      // The file shrank after it was opened (someone truncated it): report its size now.
      if (n == 0) return eof_error(r.offset, len, current_size());
      done += static_cast<uint64_t>(n);
      bytes_read_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
    }
    return Status::success();
  }

  // Opens the O_DIRECT descriptor through /proc/self/fd: the same open file as fd_ (the path
  // may have been replaced by a save since), with a file description of its own, so that
  // O_DIRECT does not apply to the buffered reads on fd_.
  void open_direct() const {
    io::DirectReadSupport s;
    const std::string proc = "/proc/self/fd/" + std::to_string(fd_.get());
    int raw;
    if (g_refuse_direct_open.load()) {
      raw = -1;
      errno = EINVAL;
    } else {
      do {
        raw = ::open(proc.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
      } while (raw < 0 && errno == EINTR);
    }
    if (raw < 0) {
      s.reason = errno == EINVAL
                     ? "the file system does not support O_DIRECT (open gives EINVAL)"
                     : errno_status(proc, "open with O_DIRECT", errno).message();
      direct_ = std::move(s);
      return;
    }
    UniqueFd fd(raw);
    struct stat a, b;
    if (::fstat(fd_.get(), &a) != 0 || ::fstat(fd.get(), &b) != 0 || a.st_dev != b.st_dev ||
        a.st_ino != b.st_ino) {
      s.reason = proc + " is not the opened file";
      direct_ = std::move(s);
      return;
    }
    s.offset_align = s.memory_align = kDefaultDirectAlign;
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (::statx(fd.get(), "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
        (sx.stx_mask & STATX_DIOALIGN) != 0) {
      if (sx.stx_dio_offset_align == 0) {
        s.reason = "the file system does not support O_DIRECT for this file (statx)";
        direct_ = std::move(s);
        return;
      }
      s.offset_align = sx.stx_dio_offset_align;
      s.memory_align = sx.stx_dio_mem_align;
    }
#endif
    // (Anything odd, or an alignment beyond 1 MiB, is not worth the trouble: buffered reads.)
    if (!power_of_two(s.offset_align) || !power_of_two(s.memory_align) ||
        s.offset_align > (1u << 20) || s.memory_align > (1u << 20)) {
      s.reason = "unusual O_DIRECT alignment (offset " + std::to_string(s.offset_align) +
                 ", memory " + std::to_string(s.memory_align) + ")";
      direct_ = std::move(s);
      return;
    }
    s.available = true;
    direct_fd_ = std::move(fd);
    direct_ = std::move(s);
  }

  uint64_t current_size() const {
    struct stat st;
    if (::fstat(fd_.get(), &st) != 0) return size_;
    return static_cast<uint64_t>(st.st_size);
  }

  Status eof_error(uint64_t offset, uint64_t len, uint64_t file_size) const {
    return Status::io_error(path_ + ": unexpected end of file at offset " +
                           std::to_string(offset) + " (wanted " + std::to_string(len) +
                           " bytes, file has " + std::to_string(file_size) + ")");
  }

  const std::string path_;
  UniqueFd fd_;
  const uint64_t size_;
  // A mapping outlives the descriptor when arrays still view it (the kernel keeps the file).
  std::shared_ptr<const Mapping> mapping_;
  mutable std::atomic<uint64_t> read_requests_{0};
  mutable std::atomic<uint64_t> bytes_read_{0};
  mutable std::once_flag direct_once_;
  mutable io::DirectReadSupport direct_;
  mutable UniqueFd direct_fd_;
};

}  // namespace

namespace io {

DirectReadSupport direct_read_support(const Source& source) {
  // Only the plain local-file Source: not a decorator over one, whose reads it could bypass.
  const auto* file = dynamic_cast<const FileSource*>(&source);
  if (file == nullptr) {
    DirectReadSupport s;
    s.reason = "not a local file";
    return s;
  }
  return file->direct_support();
}

Result<uint64_t> read_direct(const Source& source, uint64_t offset, std::span<std::byte> dst) {
  const auto* file = dynamic_cast<const FileSource*>(&source);
  if (file == nullptr) return Status::not_supported(source.name() + ": O_DIRECT read: not a local file");
  return file->read_direct(offset, dst);
}

std::vector<FileExtent> merge_extents(std::vector<FileExtent> extents) {
  std::sort(extents.begin(), extents.end(),
            [](const FileExtent& a, const FileExtent& b) { return a.offset < b.offset; });
  std::vector<FileExtent> merged;
  for (const FileExtent& e : extents) {
    if (e.size == 0) continue;
    if (!merged.empty() && e.offset <= merged.back().offset + merged.back().size + kExtentGap) {
      FileExtent& m = merged.back();
      m.size = std::max(m.offset + m.size, e.offset + e.size) - m.offset;
    } else {
      merged.push_back(e);
    }
  }
  return merged;
}

std::optional<double> cached_fraction(const Source& source, std::span<const FileExtent> extents) {
  const auto* file = dynamic_cast<const FileSource*>(&source);
  if (file == nullptr) return std::nullopt;
  return file->cached_fraction(extents);
}

uint64_t cached_fraction_pages_asked_for_testing() {
  return g_pages_asked.load(std::memory_order_relaxed);
}

std::shared_ptr<const MappedFile> map_shared_read_only(const Source& source) {
  const auto* file = dynamic_cast<const FileSource*>(&source);
  return file == nullptr ? nullptr : file->map_shared_read_only();
}

void set_refuse_direct_open_for_testing(bool refuse) { g_refuse_direct_open.store(refuse); }
void set_refuse_direct_reads_for_testing(bool refuse) { g_refuse_direct_reads.store(refuse); }
void set_cached_fraction_by_mincore_for_testing(uint64_t window_bytes) {
  g_mincore_window.store(window_bytes);
}

}  // namespace io

Result<std::shared_ptr<Source>> open_file_source(const std::string& path, bool use_mmap) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; it is rejected
  // below as not a regular file. The flag is cleared again once the file is known to be one.
  int raw;
  do {
    raw = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  } while (raw < 0 && errno == EINTR);
  if (raw < 0) return errno_status(path, "open", errno);
  UniqueFd fd(raw);

  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return errno_status(path, "stat", errno);
  if (!S_ISREG(st.st_mode)) return Status::invalid_argument(path + ": not a regular file");
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return errno_status(path, "fcntl", errno);
  }

  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::shared_ptr<const Mapping> mapping = use_mmap ? map_file(fd.get(), size) : nullptr;
  std::shared_ptr<Source> source =
      std::make_shared<FileSource>(path, std::move(fd), size, std::move(mapping));
  return source;
}

}  // namespace jtree
