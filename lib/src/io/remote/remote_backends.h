// The registrations of the remote backends in the backend table (lib/src/io/backend.h):
// http(s):// (http_backend.cc) and s3:// (s3_backend.cc).
#pragma once

#include "io/backend.h"

namespace jtree::remote {

/// http:// and https://: range reads of any URL; no writes.
const io::Backend& http_backend();
/// s3://bucket/key: reads, new objects, appends (new versions), deletion, cleanup.
const io::Backend& s3_backend();

}  // namespace jtree::remote
