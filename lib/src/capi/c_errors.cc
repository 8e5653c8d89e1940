// capi/c_errors.cc — the C API's errors, status and dtype names, version, jtree_free.
#include <cstdlib>
#include <cstring>

#include "capi/c_internal.h"

// The C codes are the C++ codes: a conversion is a cast.
static_assert(JTREE_OK == static_cast<int>(jtree::StatusCode::kOk));
static_assert(JTREE_CORRUPTION == static_cast<int>(jtree::StatusCode::kCorruption));
static_assert(JTREE_IO_ERROR == static_cast<int>(jtree::StatusCode::kIOError));
static_assert(JTREE_INVALID_ARGUMENT == static_cast<int>(jtree::StatusCode::kInvalidArgument));
static_assert(JTREE_NOT_SUPPORTED == static_cast<int>(jtree::StatusCode::kNotSupported));
static_assert(JTREE_NOT_FOUND == static_cast<int>(jtree::StatusCode::kNotFound));
static_assert(JTREE_ALREADY_EXISTS == static_cast<int>(jtree::StatusCode::kAlreadyExists));
static_assert(JTREE_PERMISSION_DENIED == static_cast<int>(jtree::StatusCode::kPermissionDenied));
static_assert(JTREE_ABORTED == static_cast<int>(jtree::StatusCode::kAborted));
static_assert(JTREE_RESOURCE_EXHAUSTED ==
              static_cast<int>(jtree::StatusCode::kResourceExhausted));
static_assert(JTREE_DTYPE_UINT4 == static_cast<int>(jtree::DType::kUInt4) &&
              JTREE_DTYPE_FLOAT6_E3M2FN == static_cast<int>(jtree::DType::kFloat6E3M2FN) &&
              JTREE_DTYPE_FLOAT6_E3M2FN + 1 == jtree::kDTypeCodeEnd);

namespace jtree::capi {
namespace {

// Handed out when not even an error object can be allocated; never freed.
jtree_error_t* oom_error() noexcept {
  static jtree_error_t* const e = [] {
    try {
      return new jtree_error_t{JTREE_RESOURCE_EXHAUSTED, "jtree: out of memory"};
    } catch (...) {
      return static_cast<jtree_error_t*>(nullptr);
    }
  }();
  return e;
}

}  // namespace

jtree_status_t fail(jtree_error_t** err, jtree_status_t code, std::string message) noexcept {
  if (err == nullptr) return code;
  if (*err != nullptr) jtree_error_free(*err);
  try {
    *err = new jtree_error_t{code, std::move(message)};
  } catch (...) {
    *err = oom_error();
  }
  return code;
}

jtree_status_t report(const Status& status, jtree_error_t** err) noexcept {
  if (status.ok()) return JTREE_OK;
  const auto code = static_cast<jtree_status_t>(status.code());
  try {
    return fail(err, code, status.message());
  } catch (...) {  // copying the message
    return fail(err, code, {});
  }
}

jtree_status_t out_of_memory(jtree_error_t** err) noexcept {
  if (err != nullptr) {
    if (*err != nullptr) jtree_error_free(*err);
    *err = oom_error();
  }
  return JTREE_RESOURCE_EXHAUSTED;
}

jtree_status_t unexpected_exception(jtree_error_t** err, const char* what) noexcept {
  try {
    std::string message = "jtree: unexpected exception";
    if (what != nullptr) message += std::string(": ") + what;
    return fail(err, JTREE_ABORTED, std::move(message));
  } catch (...) {  // building the message
    out_of_memory(err);
    return JTREE_ABORTED;
  }
}

size_t item_size_of(int code) noexcept {
  if (code <= JTREE_DTYPE_INVALID || code >= jtree::kDTypeCodeEnd) return 0;
  auto info = jtree::dtype_info(static_cast<jtree::DType>(code));
  return info ? info->item_size : 0;
}

char* malloc_string(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

}  // namespace jtree::capi

extern "C" {

const char* jtree_version(void) { return jtree::version_string().data(); }  // a literal
unsigned jtree_version_number(void) {
  // Parsed from the library's own version string, so that it is the library's and not the
  // header's (the test compares the two).
  unsigned parts[3] = {0, 0, 0};
  int i = 0;
  for (char c : jtree::version_string()) {
    if (c == '.') {
      if (++i == 3) break;
    } else if (c >= '0' && c <= '9') {
      parts[i] = parts[i] * 10 + static_cast<unsigned>(c - '0');
    } else {
      break;
    }
  }
  return parts[0] * 10000 + parts[1] * 100 + parts[2];
}
unsigned jtree_format_version(void) { return jtree::kFormatVersion; }

const char* jtree_status_name(jtree_status_t status) {
  const int code = jtree::capi::enum_int(status);
  if (code < JTREE_OK || code > JTREE_RESOURCE_EXHAUSTED) return "Unknown";
  return jtree::status_code_name(static_cast<jtree::StatusCode>(code)).data();  // literals
}

jtree_status_t jtree_error_code(const jtree_error_t* err) {
  return err ? err->code : JTREE_INVALID_ARGUMENT;
}

const char* jtree_error_message(const jtree_error_t* err) {
  return err ? err->message.c_str() : "";
}

void jtree_error_free(jtree_error_t* err) {
  if (err == nullptr || err == jtree::capi::oom_error()) return;
  delete err;
}

void jtree_free(void* p) { std::free(p); }

const char* jtree_dtype_name(jtree_dtype_t dtype) {
  const int code = jtree::capi::enum_int(dtype);
  if (code <= JTREE_DTYPE_INVALID || code >= jtree::kDTypeCodeEnd) return nullptr;
  auto info = jtree::dtype_info(static_cast<jtree::DType>(code));
  return info ? info->name.data() : nullptr;  // literals
}

jtree_dtype_t jtree_dtype_from_name(const char* name) {
  if (name == nullptr) return JTREE_DTYPE_INVALID;
  auto d = jtree::dtype_from_name(name);
  return d ? static_cast<jtree_dtype_t>(*d) : JTREE_DTYPE_INVALID;
}

size_t jtree_dtype_item_size(jtree_dtype_t dtype) {
  return jtree::capi::item_size_of(jtree::capi::enum_int(dtype));
}

}  // extern "C"
