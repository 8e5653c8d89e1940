// The table of storage backends (backend.h): one registration per backend.
#include <cctype>
#include <string>

#include "io/backend.h"
#ifdef JTREE_HAVE_REMOTE
#include "io/remote/remote_backends.h"
#endif

namespace jtree::io {
namespace {

// Every backend this build has. A new backend adds its line here (and its folder).
const std::vector<const Backend*>& registered() {
  static const std::vector<const Backend*> all = {
      &file_backend(),
#ifdef JTREE_HAVE_REMOTE
      &remote::http_backend(),
      &remote::s3_backend(),
#endif
  };
  return all;
}

// Schemes of backends that a build may leave out (JTREE_WITH_REMOTE=OFF): named in the error.
bool is_optional_remote_scheme(std::string_view scheme) {
  return iequals(scheme, "http") || iequals(scheme, "https") || iequals(scheme, "s3");
}

// "local paths, file://, http(s)://, s3://": what the registered backends read, for messages.
std::string known_schemes() {
  std::string out = "local paths";
  for (const Backend* b : registered()) {
    for (std::string_view s : b->schemes) {
      if (s == "https") continue;  // (named with http, as "http(s)://")
      out += ", " + std::string(s) + (s == "http" ? "(s)://" : "://");
    }
  }
  return out;
}

}  // namespace

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

Result<const Backend*> find_backend(std::string_view path_or_url) {
  std::string_view scheme, rest;
  if (!split_scheme(path_or_url, &scheme, &rest)) return &file_backend();
  for (const Backend* b : registered()) {
    for (std::string_view s : b->schemes) {
      if (iequals(s, scheme)) return b;
    }
  }
  if (is_optional_remote_scheme(scheme)) {
    return Status::not_supported(std::string(path_or_url) +
                                ": this build has no http(s)/s3 backend (JTREE_WITH_REMOTE=OFF)");
  }
  // NotSupported, as for a backend this build leaves out: the URL is well formed, the build
  // cannot read it (jtree/io.h open_source, jtree/c.h jtree_reader_open).
  return Status::not_supported(std::string(path_or_url) + ": unsupported URL scheme \"" +
                               std::string(scheme) + "\" (this build reads " + known_schemes() +
                               ")");
}

}  // namespace jtree::io
