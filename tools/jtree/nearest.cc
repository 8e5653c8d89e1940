#include "nearest.h"

namespace jtree::cli {
namespace {

constexpr size_t kMaxPaths = 200000;  // the paths a suggestion looks at (as the Python package)

}  // namespace

std::vector<std::string> node_paths(const Reader& r) {
  std::vector<std::string> out;
  for (uint32_t i = 1; i < r.num_nodes() && out.size() < kMaxPaths; ++i) out.push_back(r.path(i));
  return out;
}

std::string with_nearest(const std::string& message, std::string_view path, const Reader& r) {
  const std::vector<std::string> near = nearest_paths(path, node_paths(r));
  if (near.empty()) return message;
  std::string out = message + " (nearest: ";
  for (size_t i = 0; i < near.size(); ++i) out += (i ? ", '" : "'") + near[i] + "'";
  return out + ")";
}

}  // namespace jtree::cli
