// Fuzz target: open, then read every payload leaf whole and random slices of it, read byte
// payloads, take mapped leaves, and verify the file. Reads of a damaged file must fail with a
// refusal status (never crash, hang or run past a buffer); with checksums on, a read that
// succeeds must return what the chunks' checksummed bytes decode to, the same whichever way the
// bytes are requested (whole leaf, slices, one request or many).
//
// Options (the input's last 16 bytes):
//   [0] 0: bytes as they are; 1: metadata hashes repaired; 2, 3: chunk checksums repaired too
//   [1] bit 0: skip checksum verification (reach the decoders with any bytes)
//       bit 1: run verify()   bit 2: mapped_leaf()   bit 3: read_bytes()
//   [2] threads (1 + value % 2), [3] parser limits
//   [4..11] slice generator seed
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_util.h"

using namespace jtree;

namespace {

constexpr uint64_t kMaxReadBytes = 8 << 20;  // per leaf: keep executions fast

bool allowed_read_error(const Status& st) {
  return fuzz::is_refusal(st) || st.code() == StatusCode::kInvalidArgument;
}

// A random box of `shape` (possibly empty).
Box random_box(const Shape& shape, fuzz::Rng& rng) {
  Box b;
  for (uint64_t extent : shape) {
    const uint64_t lo = rng.below(extent + 1);
    const uint64_t hi = lo + rng.below(extent - lo + 1);
    b.begin.push_back(lo);
    b.end.push_back(hi);
  }
  return b;
}

// Copies `box` out of a whole C-order array of `shape` (memory layout, `item` bytes).
std::vector<std::byte> slice_of(const std::vector<std::byte>& whole, const Shape& shape,
                                const Box& box, size_t item) {
  std::vector<std::byte> out(box.num_elements() * item);
  if (out.empty()) return out;
  const size_t r = shape.size();
  Shape idx = box.begin;
  for (size_t k = 0; k < box.num_elements(); ++k) {
    uint64_t off = 0;
    for (size_t d = 0; d < r; ++d) off = off * shape[d] + idx[d];
    std::memcpy(out.data() + k * item, whole.data() + off * item, item);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < box.end[d]) break;
      idx[d] = box.begin[d];
    }
  }
  return out;
}

// A Reader of `file` written into a memfd and opened as a local, mapped file; null when the
// file cannot be made or opened (the memory-source Reader then reports why).
std::shared_ptr<Reader> open_as_mapped_file(const std::vector<std::byte>& file,
                                            const OpenOptions& oo) {
  const int fd = ::memfd_create("fuzz.jtree", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  std::shared_ptr<Reader> out;
  if (::write(fd, file.data(), file.size()) == static_cast<ssize_t>(file.size())) {
    auto r = Reader::open("/proc/self/fd/" + std::to_string(fd), oo);
    if (r.ok()) out = *r;
  }
  ::close(fd);  // (the open Source holds its own descriptor and mapping)
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Split<16> in(data, size);
  std::vector<std::byte> file(in.payload.begin(), in.payload.end());
  if (in.opt[0] % 4 != 0) fuzz::rehash(file, in.opt[0] % 4 >= 2);
  OpenOptions oo;
  oo.limits = fuzz::limits_for(in.opt[3]);
  // mapped_leaf() needs a mapped file: the same bytes in a memory-backed file (memfd).
  std::shared_ptr<Reader> mapped;
  if (in.opt[1] & 4) mapped = open_as_mapped_file(file, oo);
  auto opened = Reader::open(memory_source(std::move(file), "fuzz.jtree"), oo);
  if (!opened.ok()) return 0;
  const Reader& r = **opened;
  const Tree& t = r.tree();
  ReadOptions ro;
  ro.verify_checksums = (in.opt[1] & 1) == 0;
  ro.threads = 1 + in.opt[2] % 2;
  ro.max_fetch_bytes = 1 << 16;  // several fetch units: exercise coalescing limits
  fuzz::Rng rng{(static_cast<uint64_t>(in.u32(8)) << 32) | in.u32(4)};

  for (uint32_t l = 0; l < t.leaves.size(); ++l) {
    const Leaf& leaf = t.leaves[l];
    if (!leaf.is_payload()) continue;
    const uint64_t bytes = leaf.memory_bytes();
    if (bytes > kMaxReadBytes) continue;
    std::vector<std::byte> whole(bytes);
    Status st = r.read(l, whole, ro);
    if (!st.ok()) {
      JTREE_FUZZ_CHECK(allowed_read_error(st), st.to_string());
      continue;
    }
    // The same bytes, asked for in other ways.
    const size_t item = dtype_info(leaf.dtype)->item_size;
    for (int k = 0; k < 3; ++k) {
      const Box box = random_box(leaf.shape, rng);
      std::vector<std::byte> part(box.num_elements() * item);
      Status ps = r.read_box(l, box, part, ro);
      JTREE_FUZZ_CHECK(ps.ok(), "slice of a leaf read whole failed: " + ps.to_string());
      JTREE_FUZZ_CHECK(part == slice_of(whole, leaf.shape, box, item), "slice differs");
    }
    if (in.opt[1] & 8) {
      auto b = r.read_bytes(l, ro);
      if (b.ok()) {
        JTREE_FUZZ_CHECK(b->size() == whole.size() &&
                             fuzz::same_bytes(b->data(), whole.data(), whole.size()),
                         "read_bytes differs from read");
      } else {
        JTREE_FUZZ_CHECK(allowed_read_error(b.status()), b.status().to_string());
      }
    }
    if (mapped) {
      auto m = mapped->mapped_leaf(l, ro);
      if (m.ok() && *m) {
        JTREE_FUZZ_CHECK(m->bytes.size() == whole.size() &&
                             fuzz::same_bytes(m->bytes.data(), whole.data(), whole.size()),
                         "mapped leaf differs from read");
      }
    }
  }
  // Many leaves in one pass: chunk ranges of different requests coalesced together.
  std::vector<ReadRequest> reqs;
  std::vector<std::vector<std::byte>> bufs;
  for (uint32_t l = 0; l < t.leaves.size() && reqs.size() < 16; ++l) {
    const Leaf& leaf = t.leaves[l];
    if (!leaf.is_payload() || leaf.memory_bytes() > kMaxReadBytes) continue;
    const Box box = random_box(leaf.shape, rng);
    bufs.emplace_back(box.num_elements() * dtype_info(leaf.dtype)->item_size);
    reqs.push_back({l, box, {}});
  }
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].dst = bufs[i];
  Status many = r.read_many(reqs, ro);
  if (!many.ok()) JTREE_FUZZ_CHECK(allowed_read_error(many), many.to_string());

  if (in.opt[1] & 2) {
    auto rep = r.verify(ro);
    if (!rep.ok()) JTREE_FUZZ_CHECK(allowed_read_error(rep.status()), rep.status().to_string());
  }
  return 0;
}
