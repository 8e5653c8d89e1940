// The files of a directory with their bytes, to check that a failed operation left everything
// as it was and nothing behind (no temporary files).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace jtree::safety {

using DirState = std::map<std::string, std::vector<std::byte>>;

/// Every regular file of `dir` (not recursive) by name.
DirState dir_state(const std::string& dir);
/// Writes `state` back into `dir`, removing every other file (resets a scenario).
void restore_dir(const std::string& dir, const DirState& state);
/// Empty when equal; else the first difference ("extra file .x.tmp-..", "f.jtree changed").
/// `ignore_slots`: bytes 64..127 of `slots_of` (a commit slot region an append may rewrite)
/// are not compared.
std::string dir_difference(const DirState& got, const DirState& want,
                           const std::string& slots_of = {});

}  // namespace jtree::safety
