// Shared pieces of the jtree command: sizes, progress bar, JSON output, key[slice] parsing.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jtree/jtree.h"

namespace jtree::cli {

/// "1.5 GiB", "312 B".
std::string human_bytes(uint64_t n);
/// "[1000, 1024]".
std::string shape_string(const Shape& s);
/// "12.3%" style ratio string, or "-" when raw is 0.
std::string ratio_string(uint64_t stored, uint64_t raw);

/// A progress bar on stderr, drawn only when stderr is a terminal and the operation lasts
/// more than a moment. Thread-compatible: the library calls it under its own lock.
class Progress {
 public:
  Progress(std::string label, bool enabled);
  ~Progress();
  /// A ProgressFn that updates this bar.
  ProgressFn fn();
  void finish();

 private:
  void draw(uint64_t done, uint64_t total, bool final);
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
  uint64_t done_ = 0, total_ = 0;
};

/// Minimal JSON writer: objects, arrays, strings (escaped), numbers, booleans.
class Json {
 public:
  Json& begin_object();
  Json& end_object();
  Json& begin_array();
  Json& end_array();
  Json& key(std::string_view k);
  Json& str(std::string_view v);
  Json& num(uint64_t v);
  Json& num(int64_t v);
  Json& num(double v);
  Json& boolean(bool v);
  Json& null();
  /// A shape as an array of numbers: [4096, 256].
  Json& shape(const Shape& s);
  const std::string& text() const { return out_; }

 private:
  void comma();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element yet
  bool after_key_ = false;
};

/// "params/emb[1000:2000, :64]" -> key path + per-dimension slice (numpy syntax: start:stop,
/// negative indices, a bare index drops the dimension, '...' is not supported).
struct SliceSpec {
  std::string path;
  struct Dim {
    std::optional<int64_t> start, stop;
    bool index = false;  ///< a bare index: start only, dimension dropped
  };
  std::vector<Dim> dims;  ///< empty: no slice
};
Result<SliceSpec> parse_key_slice(std::string_view arg);

/// Resolves a slice against a shape with jtree::resolve_index (jtree/slice.h): the box, and
/// the output shape (indexed dims dropped).
Result<Box> resolve_slice(const SliceSpec& spec, const Shape& shape, Shape* out_shape);

/// Is stderr a terminal?
bool stderr_is_tty();

}  // namespace jtree::cli
