// Storage backends over Python objects: a Source reading a seekable binary file object with
// seek + readinto, a Source over an object exporting the buffer protocol (bytes, bytearray,
// memoryview, mmap...) without copying it, and a Sink writing a binary file object
// sequentially. What jtree.load(fileobj), jtree.loads(data) and jtree.save(tree, fileobj)
// are made of (python/jtree/_fileobj.py).
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <string>

#include "jtree/io.h"

namespace nb = nanobind;

namespace jtpy {

/// A Source over bytes [base, base + size) of a binary file object `f` (seek, readinto).
/// Reads take the GIL and are serialized by a mutex (the object has one position). A Python
/// exception in seek/readinto, or a short read, is an IOError naming `name`.
std::shared_ptr<jtree::Source> file_object_source(nb::object f, std::string name, uint64_t base,
                                                  uint64_t size);

/// A Source over the bytes `data` exports (a contiguous buffer), held (not copied) for as long
/// as the Source lives; a bytearray cannot be resized meanwhile.
std::shared_ptr<jtree::Source> buffer_source(nb::handle data, std::string name);

/// A Sink appending to a binary file object with write() (from its current position); commit
/// and sync flush it. abort() leaves what was written: the caller (python/jtree/_fileobj.py)
/// seeks back and truncates where the object allows.
std::unique_ptr<jtree::Sink> file_object_sink(nb::object f, std::string name);

}  // namespace jtpy
