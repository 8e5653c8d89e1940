#include "dir_state.h"

#include <algorithm>
#include <filesystem>

#include "test_util.h"

namespace jtree::safety {

DirState dir_state(const std::string& dir) {
  DirState out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file()) out[e.path().filename().string()] = testing::read_file(e.path());
  }
  return out;
}

void restore_dir(const std::string& dir, const DirState& state) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (!state.count(e.path().filename().string())) std::filesystem::remove(e.path());
  }
  for (const auto& [name, bytes] : state) testing::write_file(dir + "/" + name, bytes);
}

std::string dir_difference(const DirState& got, const DirState& want,
                           const std::string& slots_of) {
  for (const auto& [name, bytes] : got) {
    if (!want.count(name)) return "extra file " + name;
  }
  for (const auto& [name, bytes] : want) {
    auto it = got.find(name);
    if (it == got.end()) return "missing file " + name;
    const auto& g = it->second;
    if (g.size() != bytes.size()) {
      return name + " changed size: " + std::to_string(bytes.size()) + " -> " +
             std::to_string(g.size());
    }
    if (name == slots_of && g.size() >= 128) {
      if (!std::equal(g.begin(), g.begin() + 64, bytes.begin()) ||
          !std::equal(g.begin() + 128, g.end(), bytes.begin() + 128)) {
        return name + " changed outside its commit slots";
      }
    } else if (g != bytes) {
      return name + " changed";
    }
  }
  return "";
}

}  // namespace jtree::safety
