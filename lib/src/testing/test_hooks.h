// The library's test hooks for the Python bindings' tests: the one internal header the native
// module (bindings/python) includes, besides the public headers. It exposes only what those
// tests need (the host-memory stand-in copy engine, the O_DIRECT refusal switch and the cold reads'
// O_DIRECT byte count), so that
// the module's include path holds this directory alone, not lib/src. Not installed, not a
// public API.
#pragma once

#include <cstdint>
#include <memory>

#include "jtree/device.h"

namespace jtree::staging {
class HostCopyEngine;
}

namespace jtree::testing {

/// What the host stand-in engine did, for the tests' assertions (HostCopyEngine::Stats).
struct HostEngineCounters {
  uint64_t pinned_bytes = 0, peak_pinned_bytes = 0;
  uint64_t allocations = 0, frees = 0;
  uint64_t copies = 0, bytes_copied = 0;  ///< copies done and their bytes
  uint64_t misuses = 0;
  uint64_t registrations = 0, unregistrations = 0, peak_registered_bytes = 0;
};

/// The host-memory stand-in CopyEngine (lib/src/cuda/host_copy_engine.h), with its default
/// options: loads to a "device" that is host memory, where there is no GPU.
class HostEngineForTests {
 public:
  HostEngineForTests();
  ~HostEngineForTests();
  HostEngineForTests(const HostEngineForTests&) = delete;
  HostEngineForTests& operator=(const HostEngineForTests&) = delete;

  CopyEngine& engine();
  HostEngineCounters counters() const;

 private:
  std::unique_ptr<staging::HostCopyEngine> engine_;
};

/// While true, files opened from now on refuse O_DIRECT as a file system without it does
/// (io::set_refuse_direct_open_for_testing).
void refuse_direct_open(bool refuse);

/// Bytes that reads of cold local files have read with O_DIRECT since the process started
/// (cold::direct_bytes_read_for_testing).
uint64_t cold_direct_bytes_read();

}  // namespace jtree::testing
