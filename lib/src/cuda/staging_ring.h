// The ring of pinned staging buffers of a load to a device, each with its stream
// (staged_load.h fills them; the copy engine copies out of them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "jtree/device.h"

namespace jtree::staging {

// The pinned buffers and their streams. Whatever way the load ends, the destructor waits for
// every copy still queued (a buffer must not be freed under a running DMA) and then frees the
// buffers and the streams.
class StagingRing {
 public:
  struct Slot {
    std::span<std::byte> buffer;
    int stream = -1;
    bool has_stream = false;
    bool pending = false;       // copies queued since the last sync
    size_t batch = 0;           // the batch whose copies are queued (for messages)
    const std::byte* registered = nullptr;  // file pages registered for them (zero copy)
  };

  // `slots` slots, whose buffers and streams are made on first use (ensure): the first buffer
  // load starts after one allocation, not after all of them (pinning memory is slow:
  // docs/gpu.md), and the others are allocated by the fillers meanwhile.
  StagingRing(CopyEngine& engine, size_t slots) : engine_(engine), slots_(slots) {}
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;
  ~StagingRing() {
    for (Slot& s : slots_) {
      if (s.pending) (void)engine_.sync(s.stream);  // (the load already failed: its error wins)
      if (s.registered != nullptr) engine_.unregister_host(s.registered);
      if (s.has_stream) engine_.destroy_stream(s.stream);
      if (!s.buffer.empty()) engine_.free_pinned(s.buffer);
    }
  }

  // Gives slot i its stream and, unless `bytes` is 0 (a zero-copy batch needs none), its
  // buffer of `bytes`, where it lacks them. Called only by the filler whose turn slot i is
  // (the slots vector itself never changes size).
  Status ensure(size_t i, uint64_t bytes) {
    Slot& s = slots_[i];
    if (bytes > 0 && s.buffer.empty()) {
      JTREE_ASSIGN_OR_RETURN(s.buffer, engine_.allocate_pinned(bytes));
      if (s.buffer.size() < bytes) {
        return Status::io_error(engine_.name() + ": pinned buffer of " +
                               std::to_string(s.buffer.size()) + " bytes; asked for " +
                               std::to_string(bytes));
      }
    }
    if (!s.has_stream) {
      JTREE_ASSIGN_OR_RETURN(s.stream, engine_.create_stream());
      s.has_stream = true;
    }
    return Status::success();
  }

  // Waits for the slot's queued copies and then ends its registration: what a slot does
  // before it serves its next batch, and at the end of the load.
  Status settle(size_t i) {
    Slot& s = slots_[i];
    Status st;
    if (s.pending) {
      s.pending = false;
      st = engine_.sync(s.stream);
    }
    // (Unregistered even after a failed sync: no copy from it is pending any more.)
    if (s.registered != nullptr) {
      engine_.unregister_host(s.registered);
      s.registered = nullptr;
    }
    return st;
  }

  Slot& slot(size_t i) { return slots_[i]; }
  size_t size() const { return slots_.size(); }

 private:
  CopyEngine& engine_;
  std::vector<Slot> slots_;
};

}  // namespace jtree::staging
