// Small valid .jtree files of several shapes, written through the public API, for the safety
// tests to damage. Each keeps the data it was written from alive, and appended files also
// keep the bytes of their previous generation (what a reader falls back to).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace jtree::safety {

struct SampleFile {
  std::string name;
  std::vector<std::byte> bytes;
  /// Appended files: the file as it was before the append (generation 0), whose state a
  /// reader recovers when the newest generation's footer is damaged or cut off.
  std::vector<std::byte> previous;
};

/// Every shape: several dtypes compressed and raw, everything inline, nested containers with
/// tied leaves and metadata, an appended second generation, a multi-host commit.
std::vector<SampleFile> sample_files();

}  // namespace jtree::safety
