// The test hooks of testing/test_hooks.h, over the library's internals.
#include "testing/test_hooks.h"

#include "cuda/host_copy_engine.h"
#include "io/direct_read.h"
#include "read/cold_reads.h"

namespace jtree::testing {

HostEngineForTests::HostEngineForTests() : engine_(std::make_unique<staging::HostCopyEngine>()) {}
HostEngineForTests::~HostEngineForTests() = default;

CopyEngine& HostEngineForTests::engine() { return *engine_; }

HostEngineCounters HostEngineForTests::counters() const {
  const staging::HostCopyEngine::Stats s = engine_->stats();
  HostEngineCounters c;
  c.pinned_bytes = s.pinned_bytes;
  c.peak_pinned_bytes = s.peak_pinned_bytes;
  c.allocations = s.allocations;
  c.frees = s.frees;
  c.copies = s.copies_done;
  c.bytes_copied = s.bytes_copied;
  c.misuses = s.misuses;
  c.registrations = s.registrations;
  c.unregistrations = s.unregistrations;
  c.peak_registered_bytes = s.peak_registered_bytes;
  return c;
}

void refuse_direct_open(bool refuse) { io::set_refuse_direct_open_for_testing(refuse); }

uint64_t cold_direct_bytes_read() { return cold::direct_bytes_read_for_testing(); }

}  // namespace jtree::testing
