// The entry points that take a path or URL: each looks up the backend of its scheme in the
// table (backend.h) and calls it; sources and sinks then pass through the installed I/O hooks.
#include <string>
#include <string_view>

#include "io/backend.h"
#include "io/fault_injection.h"
#include "jtree/io.h"

namespace jtree {
namespace {

// Decodes %XX escapes (file URLs from pathlib's as_uri() escape spaces and non-ASCII).
// Malformed escapes are kept as written.
std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 &&
        hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// What a backend without the operation answers.
Status no_such_operation(std::string_view url, const io::Backend& b, std::string_view what) {
  return Status::not_supported(std::string(url) + ": " + std::string(what) +
                              " is not supported by the " + std::string(b.name) + " backend");
}

// A remote open or write starts with usable options (check_remote_options); a local one
// does not read them.
Status check_remote(std::string_view path_or_url, const RemoteOptions& options) {
  if (is_local_path(path_or_url)) return Status::success();
  const Status st = check_remote_options(options);
  if (st.ok()) return st;
  return Status(st.code(), std::string(path_or_url) + ": " + st.message());
}

}  // namespace

bool is_local_path(std::string_view path_or_url, std::string* local_path) {
  std::string_view scheme, rest;
  if (!io::split_scheme(path_or_url, &scheme, &rest)) {
    if (local_path != nullptr) *local_path = std::string(path_or_url);
    return true;
  }
  if (!io::iequals(scheme, "file")) return false;
  // file:///abs/path names /abs/path. "localhost" is the one host name that also means this
  // machine (RFC 8089); anything else after "file://" is taken as written.
  constexpr std::string_view kLocalhost = "localhost/";
  if (rest.size() >= kLocalhost.size() &&
      io::iequals(rest.substr(0, kLocalhost.size()), kLocalhost)) {
    rest.remove_prefix(kLocalhost.size() - 1);
  }
  if (local_path != nullptr) *local_path = percent_decode(rest);
  return true;
}

// What these open passes through the installed I/O hooks (fault injection in tests; none
// otherwise): every public entry point (save, append, compact, Reader::open) can be faulted.
Result<std::shared_ptr<Source>> open_source(std::string_view path_or_url,
                                            const OpenOptions& options) {
  JTREE_ASSIGN_OR_RETURN(const io::Backend* b, io::find_backend(path_or_url));
  JTREE_RETURN_IF_ERROR(check_remote(path_or_url, options.remote));
  if (b->open_source == nullptr) return no_such_operation(path_or_url, *b, "reading");
  JTREE_ASSIGN_OR_RETURN(std::shared_ptr<Source> s, b->open_source(path_or_url, options));
  return apply_io_hooks(std::move(s));
}

Result<std::unique_ptr<Sink>> create_sink(std::string_view path_or_url,
                                          const SinkOptions& options) {
  JTREE_ASSIGN_OR_RETURN(const io::Backend* b, io::find_backend(path_or_url));
  JTREE_RETURN_IF_ERROR(check_remote(path_or_url, options.remote));
  if (b->create_sink == nullptr) return no_such_operation(path_or_url, *b, "writing");
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<Sink> s, b->create_sink(path_or_url, options));
  return apply_io_hooks(std::move(s));
}

Result<std::unique_ptr<Sink>> open_append_sink(std::string_view path_or_url, uint64_t keep_bytes,
                                               const SinkOptions& options,
                                               std::string_view expected_etag) {
  JTREE_ASSIGN_OR_RETURN(const io::Backend* b, io::find_backend(path_or_url));
  JTREE_RETURN_IF_ERROR(check_remote(path_or_url, options.remote));
  if (b->open_append_sink == nullptr) return no_such_operation(path_or_url, *b, "appending");
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<Sink> s,
                         b->open_append_sink(path_or_url, keep_bytes, options, expected_etag));
  return apply_io_hooks(std::move(s));
}

Status remove_object(std::string_view path_or_url, const RemoteOptions& options) {
  auto b = io::find_backend(path_or_url);
  if (!b.ok() || (*b)->remove_object == nullptr) {
    return Status::not_supported(std::string(path_or_url) +
                                ": removing objects is not supported for this URL scheme");
  }
  JTREE_RETURN_IF_ERROR(check_remote(path_or_url, options));
  return (*b)->remove_object(path_or_url, options);
}

Result<uint64_t> remove_stale_temp_files(std::string_view path, const RemoteOptions& options) {
  auto b = io::find_backend(path);
  if (!b.ok() || (*b)->remove_stale == nullptr) {
    return Status::not_supported(std::string(path) +
                                ": stale temporary files are a local-file or s3:// matter");
  }
  JTREE_RETURN_IF_ERROR(check_remote(path, options));
  return (*b)->remove_stale(path, options);
}

Result<ObjectInfo> stat_object(std::string_view url, const RemoteOptions& options) {
  auto b = io::find_backend(url);
  if (!b.ok() || (*b)->stat == nullptr) {
    return Status::invalid_argument(std::string(url) +
                                   ": stat_object takes http(s):// and s3:// URLs");
  }
  JTREE_RETURN_IF_ERROR(check_remote(url, options));
  return (*b)->stat(url, options);
}

}  // namespace jtree
