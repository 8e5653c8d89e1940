// Helpers shared by the unit tests: temporary directories, deterministic random data.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "jtree/jtree.h"
#include "util/box_copy.h"
#include "../synthetic_weights.h"

namespace jtree::testing {

/// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "jtree-test-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    REQUIRE(p != nullptr);
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }
  /// Names of the entries in the directory.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (auto& e : std::filesystem::directory_iterator(path_)) {
      out.push_back(e.path().filename().string());
    }
    return out;
  }

 private:
  std::filesystem::path path_;
};

inline std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t x = g();
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, n - i));
  }
  return v;
}

/// bf16 values of normal(0, std) weights (round to nearest even), as bytes.
inline std::vector<std::byte> bf16_weights(size_t n, float std, uint64_t seed) {
  return synthetic::bf16_normal(n, std, seed);
}

inline std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  if (!c.empty()) std::memcpy(out.data(), c.data(), c.size());  // (an empty file: null data)
  return out;
}

inline void write_file(const std::string& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

/// Fills memory-layout values valid for `dtype` (4-bit types: proper nibbles; bool: 0/1).
inline std::vector<std::byte> random_array(DType dtype, uint64_t elements, uint64_t seed) {
  const auto info = *dtype_info(dtype);
  auto v = random_bytes(elements * info.item_size, seed);
  if (dtype == DType::kBool) {
    for (auto& b : v) b = static_cast<std::byte>(static_cast<uint8_t>(b) & 1);
  } else if (is_4bit(dtype)) {  // high nibble zero, int4 too (ml_dtypes' bytes)
    for (auto& b : v) b = static_cast<std::byte>(static_cast<uint8_t>(b) & 0x0f);
  }
  return v;
}

/// The box of a C-order array of `shape` (elements of `item` bytes), copied element by
/// element: what a read of that box must give.
inline std::vector<std::byte> box_reference(const std::vector<std::byte>& full,
                                            const Shape& shape, const Box& box, size_t item) {
  std::vector<std::byte> out(box.num_elements() * item);
  if (!out.empty()) {
    copy_region(full.data(), shape, box.begin, out.data(), box.shape(), Shape(shape.size(), 0),
                box.shape(), item);
  }
  return out;
}

}  // namespace jtree::testing
