#include "util/guarded.h"

namespace jtree {

namespace {

// (13 characters: within std::string's own buffer, so making it allocates nothing.)
Status out_of_memory() noexcept { return Status::resource_exhausted("out of memory"); }

}  // namespace

Status status_of_current_exception() noexcept {
  try {
    try {
      throw;
    } catch (const std::bad_alloc&) {
      return out_of_memory();
    } catch (const std::exception& e) {
      return Status::aborted(std::string("unexpected exception: ") + e.what());
    } catch (...) {
      return Status::aborted("unexpected exception");
    }
  } catch (...) {  // (building the message)
    return out_of_memory();
  }
}

}  // namespace jtree
