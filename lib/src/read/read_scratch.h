// The scratch set of a read worker (Reader::read_many's units, util/scratch_cache.h): a fetch
// unit's bytes, a decoded chunk, an unpacked 4-bit chunk, the codec's decoded planes, and a
// fetch unit's bytes read with O_DIRECT (apart from `fetch`: backed by huge pages, which
// must be asked for before the memory is first touched).
#pragma once

#include <cstddef>

#include "util/scratch_cache.h"

namespace jtree {

struct ReadScratch {
  ScratchBytes fetch, raw, unpacked, codec, direct;
  size_t bytes() const {
    return fetch.capacity() + raw.capacity() + unpacked.capacity() + codec.capacity() +
           direct.capacity();
  }
};

/// The process's read scratch sets. A call that makes several read_many calls in a row (a
/// load to a device, buffer after buffer) holds a Use of its own for all of them, so that the
/// sets are not trimmed between them.
using ReadScratchCache = ScratchCache<ReadScratch>;

}  // namespace jtree
