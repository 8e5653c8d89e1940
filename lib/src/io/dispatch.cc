// Picks a backend from a path or URL.
#include <cctype>
#include <string>
#include <string_view>

#include "io/fault_injection.h"
#include "jtree/io.h"
#ifdef JTREE_HAVE_REMOTE
#include "io/remote/remote_io.h"
#endif

namespace jtree {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Splits "scheme://rest". False for a plain path: no "://", or text before it that is not a
// scheme (RFC 3986: a letter, then letters, digits, '+', '-', '.'), as in "runs/a://b".
bool split_scheme(std::string_view s, std::string_view* scheme, std::string_view* rest) {
  const size_t pos = s.find("://");
  if (pos == std::string_view::npos || pos == 0) return false;
  if (!std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  for (size_t i = 1; i < pos; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (!std::isalnum(c) && c != '+' && c != '-' && c != '.') return false;
  }
  *scheme = s.substr(0, pos);
  *rest = s.substr(pos + 3);
  return true;
}

bool is_remote_scheme(std::string_view url) {
  std::string_view scheme, rest;
  return split_scheme(url, &scheme, &rest) &&
         (iequals(scheme, "http") || iequals(scheme, "https") || iequals(scheme, "s3"));
}

// Why a URL cannot be opened: an unknown scheme, or (in a build without JTREE_WITH_REMOTE) a
// remote one.
Status unsupported(std::string_view url) {
  if (is_remote_scheme(url)) {
    return Status::NotSupported(std::string(url) +
                                ": this build has no http(s)/s3 backend (JTREE_WITH_REMOTE=OFF)");
  }
  std::string_view scheme, rest;
  split_scheme(url, &scheme, &rest);
  return Status::InvalidArgument(std::string(url) + ": unsupported URL scheme \"" +
                                 std::string(scheme) + "\"");
}

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

}  // namespace

bool is_local_path(std::string_view path_or_url, std::string* local_path) {
  std::string_view scheme, rest;
  if (!split_scheme(path_or_url, &scheme, &rest)) {
    if (local_path != nullptr) *local_path = std::string(path_or_url);
    return true;
  }
  if (!iequals(scheme, "file")) return false;
  // file:///abs/path names /abs/path. "localhost" is the one host name that also means this
  // machine (RFC 8089); anything else after "file://" is taken as written.
  constexpr std::string_view kLocalhost = "localhost/";
  if (rest.size() >= kLocalhost.size() && iequals(rest.substr(0, kLocalhost.size()), kLocalhost)) {
    rest.remove_prefix(kLocalhost.size() - 1);
  }
  if (local_path != nullptr) *local_path = percent_decode(rest);
  return true;
}

namespace {

Result<std::shared_ptr<Source>> open_source_unhooked(std::string_view path_or_url,
                                                     const OpenOptions& options) {
  std::string local;
  if (is_local_path(path_or_url, &local)) return open_file_source(local, options.use_mmap);
#ifdef JTREE_HAVE_REMOTE
  if (is_remote_scheme(path_or_url)) return remote::open_remote_source(path_or_url, options.remote);
#endif
  return unsupported(path_or_url);
}

Result<std::unique_ptr<Sink>> create_sink_unhooked(std::string_view path_or_url,
                                                   const SinkOptions& options) {
  std::string local;
  if (is_local_path(path_or_url, &local)) return create_file_sink(local, options);
#ifdef JTREE_HAVE_REMOTE
  if (is_remote_scheme(path_or_url)) return remote::create_remote_sink(path_or_url, options);
#endif
  return unsupported(path_or_url);
}

Result<std::unique_ptr<Sink>> open_append_sink_unhooked(std::string_view path_or_url,
                                                        uint64_t keep_bytes,
                                                        const SinkOptions& options,
                                                        std::string_view expected_etag) {
  std::string local;
  if (is_local_path(path_or_url, &local)) {
    return open_file_append_sink(local, keep_bytes, options.sync);
  }
#ifdef JTREE_HAVE_REMOTE
  if (is_remote_scheme(path_or_url)) {
    return remote::open_remote_append_sink(path_or_url, keep_bytes, options, expected_etag);
  }
#endif
  return unsupported(path_or_url);
}

}  // namespace

// What these open passes through the installed I/O hooks (fault injection in tests; none
// otherwise): every public entry point (save, append, compact, Reader::Open) can be faulted.
Result<std::shared_ptr<Source>> open_source(std::string_view path_or_url,
                                            const OpenOptions& options) {
  JTREE_ASSIGN_OR_RETURN(std::shared_ptr<Source> s, open_source_unhooked(path_or_url, options));
  return apply_io_hooks(std::move(s));
}

Result<std::unique_ptr<Sink>> create_sink(std::string_view path_or_url,
                                          const SinkOptions& options) {
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<Sink> s, create_sink_unhooked(path_or_url, options));
  return apply_io_hooks(std::move(s));
}

Result<std::unique_ptr<Sink>> open_append_sink(std::string_view path_or_url, uint64_t keep_bytes,
                                               const SinkOptions& options,
                                               std::string_view expected_etag) {
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<Sink> s, open_append_sink_unhooked(
                                                      path_or_url, keep_bytes, options,
                                                      expected_etag));
  return apply_io_hooks(std::move(s));
}

}  // namespace jtree
