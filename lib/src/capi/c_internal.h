// capi/c_internal.h — what the C API's translation units share: the handle structs behind the
// opaque C types, the error reporting, and the guard that keeps C++ exceptions inside.
//
// The C API translates and decides nothing: every check here is of the C arguments themselves
// (NULL pointers, numbers out of range, sizes that disagree); what a file or a tree may be is
// the C++ library's to say, and its Status (code and message) is passed through unchanged.
#pragma once

#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "jtree/c.h"
#include "jtree/device.h"
#include "jtree/jtree.h"

struct jtree_error_t {
  jtree_status_t code;
  std::string message;
};

struct jtree_remote_options_t {
  jtree::RemoteOptions remote;
};

struct jtree_open_options_t {
  jtree::OpenOptions open;
  jtree::ReadOptions read;  // the defaults of every read made through the reader
};

struct jtree_reader_t {
  std::shared_ptr<const jtree::Reader> reader;
  jtree::ReadOptions read;  // immutable after open: reads from many threads share it
};

struct jtree_leaf_view_t {
  std::shared_ptr<const void> owner;  // keeps the mapping alive
  const void* data = nullptr;
  size_t size = 0;
};

struct jtree_verify_report_t {
  jtree::VerifyReport report;
};

struct jtree_builder_t {
  jtree::TreeBuilder builder;
  // Set by the first save or append (TreeBuilder::finish): the finished tree, or why not.
  bool frozen = false;
  std::optional<jtree::Tree> tree;
  jtree::Status finish_error;
};

struct jtree_write_options_t {
  jtree::WriteOptions write;
};

struct jtree_device_options_t {
  jtree::DeviceOptions device;  // (its read options unused: a load takes the reader's)
};

namespace jtree::capi {

/// Stores a new error in `*err` (freeing what it held) when `err` is not NULL; returns `code`.
/// Never throws: when even the error cannot be allocated, `*err` gets a static "out of
/// memory" error that jtree_error_free() knows not to free.
jtree_status_t fail(jtree_error_t** err, jtree_status_t code, std::string message) noexcept;

/// A C++ Status as a C code; reports it through `err` unless it is OK.
jtree_status_t report(const Status& status, jtree_error_t** err) noexcept;

/// The out-of-memory error (ResourceExhausted).
jtree_status_t out_of_memory(jtree_error_t** err) noexcept;

/// InvalidArgument "<fn>: <what>".
inline jtree_status_t invalid(jtree_error_t** err, const char* fn, const std::string& what) {
  return fail(err, JTREE_INVALID_ARGUMENT, std::string(fn) + ": " + what);
}

/// Aborted "jtree: unexpected exception: <what>" (`what` may be NULL); never throws.
jtree_status_t unexpected_exception(jtree_error_t** err, const char* what) noexcept;

/// Runs `body` (returning jtree_status_t) so that no exception escapes into C: allocation
/// failures become ResourceExhausted, anything else Aborted naming the exception. Every
/// exported function that may allocate runs its whole body in one.
template <typename F>
jtree_status_t guard(jtree_error_t** err, F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return out_of_memory(err);
  } catch (const std::exception& e) {
    return unexpected_exception(err, e.what());
  } catch (...) {
    return unexpected_exception(err, nullptr);
  }
}

/// The integer a C caller passed as an enum parameter. C lets any int through a C enum type,
/// but in C++ loading an enum object outside its enumerators' range is undefined: read its
/// bytes instead, then check the number.
template <typename E>
int enum_int(const E& e) noexcept {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

/// Bytes per element in memory of the dtype code `code`; 0 for unknown codes.
size_t item_size_of(int code) noexcept;

/// A NUL-terminated malloc'd copy (what jtree_free() frees); throws std::bad_alloc.
char* malloc_string(std::string_view s);

/// Sets *out to a new T created with `args`, or returns NULL when out of memory (the create
/// functions of options handles, which have no error parameter).
template <typename T>
T* create_nothrow() noexcept {
  try {
    return new T();
  } catch (...) {
    return nullptr;
  }
}

/// The reader handle's checks: NULL reader, node or leaf number out of range.
jtree_status_t check_reader(const jtree_reader_t* r, const char* fn, jtree_error_t** err);
jtree_status_t check_node(const jtree_reader_t* r, uint32_t node, const char* fn,
                          jtree_error_t** err);
jtree_status_t check_leaf(const jtree_reader_t* r, uint32_t leaf, const char* fn,
                          jtree_error_t** err);

/// The caller's box [begin, end) of `rank` dimensions for `leaf` of the reader, into *out.
/// `rank` is compared with the leaf's before begin and end are read: the caller's arrays hold
/// `rank` numbers, so a wrong rank (SIZE_MAX, say) is InvalidArgument (check_box_rank's
/// message), not a read past their end. A leaf out of range is left to the C++ checks, which
/// name it (out is then empty).
/// `what` prefixes the messages ("request 3: ", or "").
jtree_status_t box_of(const jtree_reader_t* r, uint32_t leaf, size_t rank, const uint64_t* begin,
                      const uint64_t* end, const char* fn, const std::string& what,
                      jtree::Box* out, jtree_error_t** err);

}  // namespace jtree::capi

/// Returns from the enclosing function when a check failed.
#define JTREE_C_CHECK(expr)                  \
  do {                                       \
    const jtree_status_t _jt_c = (expr);     \
    if (_jt_c != JTREE_OK) return _jt_c;     \
  } while (0)

/// InvalidArgument when a required pointer argument is NULL.
#define JTREE_C_REQUIRE(ptr, fn, err)                                                  \
  do {                                                                                 \
    if ((ptr) == nullptr) {                                                            \
      return ::jtree::capi::invalid((err), (fn), std::string(#ptr) + " is NULL");      \
    }                                                                                  \
  } while (0)
