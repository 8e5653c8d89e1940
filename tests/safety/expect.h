// Comparing what a reader saw with what it had to see, and counting mismatches without
// flooding the output (a systematic bug would otherwise report each of 100,000 cases).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "snapshot.h"

namespace jtree::safety {

/// Empty when `got` matches `want`; else what differs. A non-OK status in `want` (of the open
/// or of a leaf) matches a status of the same code whose message starts with `name` (errors
/// name the file) and contains want's message; OK statuses need equal data.
std::string difference(const Snapshot& got, const Snapshot& want, std::string_view name);

/// A snapshot that expects the open to fail with `code` and a message containing `text`.
Snapshot failure(StatusCode code, std::string text);

/// Counts cases and failures; reports the first few failures in full.
class Tally {
 public:
  explicit Tally(std::string what) : what_(std::move(what)) {}
  ~Tally();
  /// Records one case; `problem` empty means it passed.
  void record(const std::string& problem, const std::string& where);
  uint64_t cases() const { return cases_; }
  uint64_t failures() const { return failures_; }

 private:
  std::string what_;
  uint64_t cases_ = 0;
  uint64_t failures_ = 0;
};

}  // namespace jtree::safety
