#include "expect.h"

#include <doctest/doctest.h>

namespace jtree::safety {

namespace {

std::string status_mismatch(const Status& got, const Status& want, std::string_view name) {
  if (want.ok()) return got.ok() ? "" : "unexpected error: " + got.to_string();
  if (got.code() != want.code()) {
    return "expected " + std::string(status_code_name(want.code())) + " (" + want.message() +
           "), got " + got.to_string();
  }
  if (got.message().rfind(name, 0) != 0) return "message does not name the file: " + got.message();
  if (got.message().find(want.message()) == std::string::npos) {
    return "message lacks '" + want.message() + "': " + got.message();
  }
  return "";
}

}  // namespace

std::string difference(const Snapshot& got, const Snapshot& want, std::string_view name) {
  if (std::string s = status_mismatch(got.status, want.status, name); !s.empty()) return s;
  if (!want.status.ok()) return "";
  if (got.structure != want.structure) return "the tree's structure changed";
  if (got.generation != want.generation) {
    return "generation " + std::to_string(got.generation) + ", expected " +
           std::to_string(want.generation);
  }
  if (got.recovered != want.recovered) return "recovered flag differs";
  if (got.leaves.size() != want.leaves.size()) return "number of leaves changed";
  for (size_t i = 0; i < want.leaves.size(); ++i) {
    const LeafSnapshot &g = got.leaves[i], &w = want.leaves[i];
    const std::string where = "leaf " + std::to_string(i) + ": ";
    if (g.spec != w.spec) return where + "spec changed: " + g.spec;
    if (std::string s = status_mismatch(g.status, w.status, name); !s.empty()) return where + s;
    if (w.status.ok() && g.data != w.data) return where + "WRONG DATA";
  }
  return "";
}

Snapshot failure(StatusCode code, std::string text) {
  Snapshot s;
  s.status = Status(code, std::move(text));
  return s;
}

void Tally::record(const std::string& problem, const std::string& where) {
  ++cases_;
  if (problem.empty()) return;
  if (++failures_ <= 8) FAIL_CHECK(what_ << ": " << where << ": " << problem);
}

Tally::~Tally() {
  CHECK_MESSAGE(failures_ == 0, what_ << ": " << failures_ << " of " << cases_ << " cases failed");
}

}  // namespace jtree::safety
