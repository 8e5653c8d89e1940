// Loads into GPU memory through the CUDA copy engine (jtree/device.h): built only with CUDA
// support. Needs a CUDA device: without one it says so loudly and exits 77, which ctest reports
// as Skipped (not as passed); with JTREE_TEST_REQUIRE_ALL=1 it fails instead.
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#include <doctest/doctest.h>

#include "cuda/device_scope.h"
#include "jtree/device.h"
#include "unit/cuda_test_main.h"
#include "unit/test_util.h"
#include "util/box_copy.h"

using namespace jtree;
using namespace jtree::testing;

namespace {

// Device memory, freed on scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t bytes) : n(bytes) {
    REQUIRE(cudaMalloc(&p, std::max<size_t>(bytes, 1)) == cudaSuccess);
    REQUIRE(cudaMemset(p, 0xCD, std::max<size_t>(bytes, 1)) == cudaSuccess);
  }
  ~DeviceBuffer() { (void)cudaFree(p); }
  std::vector<std::byte> to_host() const {
    std::vector<std::byte> out(n);
    REQUIRE(cudaMemcpy(out.data(), p, n, cudaMemcpyDeviceToHost) == cudaSuccess);
    return out;
  }
};

// (Below: an 8 MiB float32 leaf of `rows` rows saved raw at `path`; its bytes.)
std::vector<std::byte> save_raw_rows(const std::string& path, uint64_t rows, uint64_t seed);

}  // namespace

// First in the file: doctest runs the cases in file order, and every later one uses device 0.
TEST_CASE("CUDA, several GPUs: a load to another device makes no context on device 0") {
  const int n = cuda_device_count();
  if (n < 2) {
    std::fprintf(stderr, "!!! SKIPPED (not counted): one CUDA device; the check that a load to "
                         "another device leaves device 0 alone needs two\n");
    return;
  }
  if (cuda_detail::primary_context_active(0)) {
    std::fprintf(stderr, "!!! SKIPPED (not counted): device 0 already has a context in this "
                         "process (run this case alone or first)\n");
    return;
  }
  TempDir dir;
  const std::vector<std::byte> data = save_raw_rows(dir.file("d.jtree"), 4096, 7);
  auto r = *Reader::open(dir.file("d.jtree"));
  const int last = n - 1;
  auto mem = allocate_device_memory(last, data.size());
  REQUIRE_MESSAGE(mem.ok(), mem.status().to_string());
  DeviceRequest req{0, std::nullopt, (*mem)->data(), data.size()};
  DeviceOptions o;
  o.device = last;
  REQUIRE(read_many_to_device(*r, std::span(&req, 1), o).ok());
  std::vector<std::byte> back(data.size());
  {
    cuda_detail::DeviceScope scope(last);
    REQUIRE(cudaMemcpy(back.data(), (*mem)->data(), back.size(), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
  }
  CHECK(back == data);
  mem->reset();                     // (freed on the device it was made on)
  (void)release_pinned_memory();    // (the staging buffers too)
  CHECK(cuda_detail::primary_context_active(last));
  CHECK_FALSE(cuda_detail::primary_context_active(0));
}

TEST_CASE("CUDA: raw and compressed leaves and boxes land bit-exact in device memory") {
  TempDir dir;
  struct Spec {
    DType dtype;
    Shape shape;
    Shape chunk;
    Codec codec;
  };
  const std::vector<Spec> specs = {
      {DType::kFloat32, {4096, 1024}, {512, 1024}, Codec::kRaw},    // 16 MiB raw
      {DType::kBFloat16, {2048, 1024}, {256, 1024}, Codec::kZstd},  // 4 MiB compressed
      {DType::kInt4, {45, 31}, {8, 7}, Codec::kZstd},
      {DType::kFloat64, {}, {}, Codec::kRaw},
  };
  std::vector<std::vector<std::byte>> data;
  TreeBuilder b;
  b.list();
  for (size_t i = 0; i < specs.size(); ++i) {
    uint64_t n = 1;
    for (auto e : specs[i].shape) n *= e;
    data.push_back(i == 1 ? bf16_weights(n, 0.02f, 3) : random_array(specs[i].dtype, n, 40 + i));
    LeafOptions lo;
    lo.chunk_shape = specs[i].chunk;
    lo.codec = specs[i].codec;
    b.array(specs[i].dtype, specs[i].shape, ArrayView{data.back().data()}, lo);
  }
  b.end();
  REQUIRE(save(std::move(*std::move(b).finish()), dir.file("g.jtree")).ok());
  auto r = *Reader::open(dir.file("g.jtree"));
  std::mt19937 g(1);
  for (uint64_t staging : {uint64_t{1} << 20, uint64_t{64} << 20}) {
    CAPTURE(staging);
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    std::vector<std::vector<std::byte>> want;
    std::vector<DeviceRequest> reqs;
    for (size_t i = 0; i < specs.size(); ++i) {
      const size_t item = dtype_info(specs[i].dtype)->item_size;
      Box box{Shape(specs[i].shape.size()), Shape(specs[i].shape.size())};
      for (size_t d = 0; d < box.begin.size(); ++d) {
        uint64_t x = g() % (specs[i].shape[d] + 1), y = g() % (specs[i].shape[d] + 1);
        box.begin[d] = std::min(x, y);
        box.end[d] = std::max(x, y);
      }
      for (const Box& bx : {Box::all(specs[i].shape), box}) {
        want.push_back(box_reference(data[i], specs[i].shape, bx, item));
        bufs.push_back(std::make_unique<DeviceBuffer>(want.back().size()));
        reqs.push_back({static_cast<uint32_t>(i), bx, bufs.back()->p, want.back().size()});
      }
    }
    DeviceOptions o;
    o.staging_bytes = staging;
    Status st = read_many_to_device(*r, reqs, o);
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    for (size_t i = 0; i < reqs.size(); ++i) {
      CAPTURE(i);
      CHECK(bufs[i]->to_host() == want[i]);
    }
  }
}

namespace {

// Saves {"w": `rows` x 512 random float32, raw, in 512 KiB chunks} at `path`; returns its bytes.
std::vector<std::byte> save_raw_rows(const std::string& path, uint64_t rows, uint64_t seed) {
  auto data = random_array(DType::kFloat32, rows * 512, seed);
  TreeBuilder b;
  b.dict();
  LeafOptions lo;
  lo.chunk_shape = {256, 512};
  lo.codec = Codec::kRaw;
  b.key("w").array(DType::kFloat32, {rows, 512}, ArrayView{data.data()}, lo);
  b.end();
  REQUIRE(save(std::move(*std::move(b).finish()), path).ok());
  return data;
}

// save_raw_rows' 8 MiB leaf in a temporary file, its reader, device memory for it and the
// request for the whole leaf there; no pinned buffer cached at the start.
struct RawLeafLoad {
  TempDir dir;
  std::vector<std::byte> data;
  std::shared_ptr<Reader> r;
  DeviceBuffer dev;
  DeviceRequest req;
  explicit RawLeafLoad(uint64_t seed)
      : data(save_raw_rows(dir.file("d.jtree"), 4096, seed)),
        r(*Reader::open(dir.file("d.jtree"))),
        dev(data.size()),
        req{0, std::nullopt, dev.p, data.size()} {
    (void)release_pinned_memory();
  }
};

}  // namespace

TEST_CASE("CUDA: O_DIRECT into pinned buffers, and the buffers kept between loads") {
  RawLeafLoad f(11);
  auto& [dir, data, r, dev, req] = f;
  for (DirectIo mode : {DirectIo::kOn, DirectIo::kOff, DirectIo::kAuto}) {
    CAPTURE(static_cast<int>(mode));
    DeviceStats stats;
    DeviceOptions o;
    o.staging_bytes = 4 << 20;
    o.staging_buffers = 4;
    o.direct_io = mode;
    o.stats = &stats;
    Status st = read_many_to_device(*r, std::span(&req, 1), o);
    if (mode == DirectIo::kOn && st.is_not_supported()) {
      MESSAGE("!!!! O_DIRECT is not available for " << dir.file("d.jtree") << ": " << st.message());
      continue;
    }
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    CHECK(dev.to_host() == data);
    if (mode == DirectIo::kOn) CHECK(stats.direct_bytes == data.size());
    if (mode == DirectIo::kOff) CHECK(stats.direct_bytes == 0);
    MESSAGE("direct_io " << static_cast<int>(mode) << ": " << stats.direct_bytes
                         << " bytes O_DIRECT; " << stats.direct_io_note);
  }
  // The four 1 MiB buffers stayed pinned for the next load; released on demand, once.
  CHECK(release_pinned_memory() == uint64_t{4} << 20);
  CHECK(release_pinned_memory() == 0);
}

TEST_CASE("CUDA: a child of fork() has none of its parent's pinned buffers; the parent's stay") {
  // The child (a data loader's worker, say) cannot use CUDA and has none of the buffers
  // mapped (MADV_DONTFORK): its release frees nothing and touches nothing of the parent's.
  RawLeafLoad f(13);
  auto& [dir, data, r, dev, req] = f;
  DeviceOptions o;
  o.staging_bytes = 4 << 20;
  o.staging_buffers = 4;
  REQUIRE(read_many_to_device(*r, std::span(&req, 1), o).ok());
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(release_pinned_memory() == 0 ? 0 : 1);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(release_pinned_memory() == uint64_t{4} << 20);
}

TEST_CASE("CUDA: staging buffers pinned ahead serve the next load; none pinned twice") {
  RawLeafLoad f(12);
  auto& [dir, data, r, dev, req] = f;
  DeviceOptions o;
  o.staging_bytes = 4 << 20;
  o.staging_buffers = 4;
  REQUIRE(pin_staging_buffers_async(o).ok());
  REQUIRE(pin_staging_buffers_async(o).ok());  // (already under way: nothing more)
  // The load takes its buffers as they arrive (it waits for them rather than pinning more).
  const Status st = read_many_to_device(*r, std::span(&req, 1), o);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(dev.to_host() == data);
  CHECK(release_pinned_memory() == uint64_t{4} << 20);  // four 1 MiB blocks, not eight
  // Once they are cached, asking again pins nothing.
  REQUIRE(read_many_to_device(*r, std::span(&req, 1), o).ok());
  REQUIRE(pin_staging_buffers_async(o).ok());
  CHECK(release_pinned_memory() == uint64_t{4} << 20);
  o.device = cuda_device_count();
  CHECK(pin_staging_buffers_async(o).code() == StatusCode::kInvalidArgument);  // (out of range)
}

TEST_CASE("CUDA: device memory of jtree's own holds a load; too much is ResourceExhausted") {
  RawLeafLoad f(13);
  auto mem = allocate_device_memory(0, f.data.size());
  REQUIRE_MESSAGE(mem.ok(), mem.status().to_string());
  CHECK((*mem)->size() == f.data.size());
  CHECK((*mem)->device() == 0);
  CHECK(reinterpret_cast<uintptr_t>((*mem)->data()) % 256 == 0);
  DeviceRequest req{0, std::nullopt, (*mem)->data(), f.data.size()};
  REQUIRE(read_many_to_device(*f.r, std::span(&req, 1)).ok());
  std::vector<std::byte> back(f.data.size());
  REQUIRE(cudaMemcpy(back.data(), (*mem)->data(), back.size(), cudaMemcpyDeviceToHost) ==
          cudaSuccess);
  CHECK(back == f.data);
  mem->reset();  // (cudaFree)
  const Status huge = allocate_device_memory(0, uint64_t{1} << 50).status();  // 1 PiB
  CHECK(huge.code() == StatusCode::kResourceExhausted);
  CHECK_MESSAGE(huge.message().find("bytes free") != std::string::npos, huge.message());
  // Room to keep free: refused before cudaMalloc when the allocation would take it.
  size_t free_bytes = 0, total_bytes = 0;
  REQUIRE(cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess);
  const Status kept = allocate_device_memory(0, 1 << 20, free_bytes).status();
  CHECK(kept.code() == StatusCode::kResourceExhausted);
  CHECK_MESSAGE(kept.message().find("to stay free") != std::string::npos, kept.message());
  auto within = allocate_device_memory(0, 1 << 20, free_bytes / 4);
  CHECK_MESSAGE(within.ok(), within.status().to_string());
  CHECK(allocate_device_memory(cuda_device_count(), 16).status().code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("CUDA: zero copy from the file's registered pages, bit-exact, nothing pinned") {
  RawLeafLoad f(12);
  auto& [dir, data, r, dev, req] = f;
  for (bool verify : {true, false}) {
    CAPTURE(verify);
    DeviceStats stats;
    DeviceOptions o;
    o.staging_bytes = 4 << 20;
    o.staging_buffers = 4;
    o.zero_copy = ZeroCopy::kOn;
    o.read.verify_checksums = verify;
    o.stats = &stats;
    REQUIRE(cudaMemset(dev.p, 0xCD, data.size()) == cudaSuccess);
    Status st = read_many_to_device(*r, std::span(&req, 1), o);
    if (st.is_not_supported()) {
      MESSAGE("!!!! zero copy is not available on this device: " << st.message());
      return;
    }
    REQUIRE_MESSAGE(st.ok(), st.to_string());
    CHECK(dev.to_host() == data);
    CHECK(stats.zero_copy_bytes == data.size());
    CHECK(stats.buffered_bytes == 0);
  }
  // Nothing was staged: no pinned buffer was kept.
  CHECK(release_pinned_memory() == 0);
}

TEST_CASE("CUDA: a damaged chunk in the middle of a load is Corruption naming it; loads go on") {
  TempDir dir;
  const auto data = save_raw_rows(dir.file("c.jtree"), 2048, 9);
  DeviceBuffer dev(data.size());
  DeviceOptions o;
  o.staging_bytes = 1 << 20;
  o.staging_buffers = 2;
  {
    auto r = *Reader::open(dir.file("c.jtree"));
    DeviceRequest req{0, std::nullopt, dev.p, data.size()};
    REQUIRE(read_many_to_device(*r, std::span(&req, 1), o).ok());
    CHECK(dev.to_host() == data);
    const ChunkInfo c = r->chunk(r->leaf(0).first_chunk + 3);
    auto bytes = read_file(dir.file("c.jtree"));
    bytes[c.file_offset + 100] ^= std::byte{1};
    write_file(dir.file("c2.jtree"), bytes);
  }
  auto bad = *Reader::open(dir.file("c2.jtree"));
  DeviceRequest req{0, std::nullopt, dev.p, data.size()};
  for (int i = 0; i < 20; ++i) {  // (pinned buffers leaking would pile up here)
    Status st = read_many_to_device(*bad, std::span(&req, 1), o);
    REQUIRE(st.code() == StatusCode::kCorruption);
    CHECK(st.message().find("leaf w: chunk 3") != std::string::npos);
  }
  auto good = *Reader::open(dir.file("c.jtree"));
  REQUIRE(read_many_to_device(*good, std::span(&req, 1), o).ok());
  CHECK(dev.to_host() == data);
}

TEST_CASE("CUDA: a bad device number, and the current device left as it was") {
  int n = 0;
  REQUIRE(cudaGetDeviceCount(&n) == cudaSuccess);
  auto e = make_cuda_copy_engine(n);
  CHECK(e.status().code() == StatusCode::kInvalidArgument);
  REQUIRE(cudaSetDevice(n - 1) == cudaSuccess);
  auto ok = make_cuda_copy_engine(0);
  REQUIRE(ok.ok());
  auto buf = (*ok)->allocate_pinned(1 << 20);
  REQUIRE(buf.ok());
  int cur = -1;
  REQUIRE(cudaGetDevice(&cur) == cudaSuccess);
  CHECK(cur == n - 1);
  (*ok)->free_pinned(*buf);
}

TEST_CASE("CUDA: the driver says which devices have a context; memory freed on any thread") {
  // (lib/src/cuda/device_scope.h: a thread's previous device is made current again only where
  // its context exists, asked of the driver; were the lookups to fail, every device would
  // count as having one, as before, so they must succeed here.)
  REQUIRE(cuda_detail::driver_function("cuDeviceGet") != nullptr);
  REQUIRE(cuda_detail::driver_function("cuDevicePrimaryCtxGetState") != nullptr);
  REQUIRE(cuda_detail::driver_function("cuNoSuchFunction") == nullptr);
  CHECK(cudaGetLastError() == cudaSuccess);  // (a failed lookup leaves no error behind)
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaFree(nullptr) == cudaSuccess);  // (device 0's primary context made)
  CHECK(cuda_detail::primary_context_active(0));
  // jtree's device memory freed by a thread that never used CUDA (a JAX array's last owner).
  auto mem = allocate_device_memory(0, 1 << 20);
  REQUIRE(mem.ok());
  std::thread([&] { mem->reset(); }).join();
  CHECK(cudaGetLastError() == cudaSuccess);
  // A scope on a thread without a context: the load's device is current in it.
  int inside = -1, after = -1;
  std::thread([&] {
    {
      cuda_detail::DeviceScope scope(0);
      CHECK(scope.status() == cudaSuccess);
      (void)cudaGetDevice(&inside);
    }
    (void)cudaGetDevice(&after);
  }).join();
  CHECK(inside == 0);
  CHECK(after == 0);
}

int main(int argc, char** argv) {
  return run_with_cuda_device(argc, argv, "test_device_cuda",
                              "the CUDA copy engine was compiled but NOT tested on a GPU");
}
