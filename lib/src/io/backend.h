// The seam between jtree and its storage backends: one table from URL scheme to what a
// backend can do (open a Source, create a Sink, open an append Sink, remove an object, clean
// up what killed writers left, stat an object). open_source(), create_sink(),
// open_append_sink(), remove_object(), remove_stale_temp_files() and stat_object() look the
// scheme up here and call the backend's entry; nothing else in the library knows schemes.
//
// A new backend (Azure Blob, native GCS) is one folder of its own (say lib/src/io/azure/)
// defining a `const Backend& azure_backend()`, plus one line in the table in backends.cc and
// its sources in the build. Local paths and file:// URLs are the "file" backend
// (file_backend.cc); http(s):// and s3:// are in lib/src/io/remote/.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "jtree/io.h"
#include "jtree/remote.h"

namespace jtree::io {

/// What one backend provides. Entries are plain functions taking the full path or URL as the
/// caller gave it (they name it in their errors). A null entry is an operation the backend
/// does not have; the dispatcher then answers NotSupported naming the URL. An entry may also
/// refuse with its own, more specific message (http(s) sinks say to write to s3:// instead).
struct Backend {
  /// For messages ("file", "http(s)", "s3").
  std::string_view name;
  /// The URL schemes it serves, lower case ("https"); matched case-insensitively.
  std::vector<std::string_view> schemes;

  /// A Source; no request needs to be made before the first read.
  Result<std::shared_ptr<Source>> (*open_source)(std::string_view url,
                                                 const OpenOptions& options) = nullptr;
  /// A Sink for a new object, visible only on commit() (jtree/io.h create_sink).
  Result<std::unique_ptr<Sink>> (*create_sink)(std::string_view url,
                                               const SinkOptions& options) = nullptr;
  /// A Sink adding bytes after the object's first `keep_bytes` (jtree/io.h open_append_sink);
  /// its commit must not replace a version other than `expected_etag` (when not empty).
  Result<std::unique_ptr<Sink>> (*open_append_sink)(std::string_view url, uint64_t keep_bytes,
                                                    const SinkOptions& options,
                                                    std::string_view expected_etag) = nullptr;
  /// Deletes the object; NotFound when absent. (`options`: a remote backend's settings.)
  Status (*remove_object)(std::string_view url, const RemoteOptions& options) = nullptr;
  /// Removes what killed writers of the target left (temporary files, incomplete uploads);
  /// returns how many (jtree/io.h remove_stale_temp_files).
  Result<uint64_t> (*remove_stale)(std::string_view url, const RemoteOptions& options) = nullptr;
  /// Size and ETag of an object (jtree/remote.h stat_object).
  Result<ObjectInfo> (*stat)(std::string_view url, const RemoteOptions& options) = nullptr;
};

/// The backend of a path or URL: "file" for paths without a scheme and for file:// URLs, the
/// registered backend of the URL's scheme otherwise. Not found: NotSupported, for a scheme no
/// backend serves ("unsupported URL scheme", naming those this build reads) as for the schemes
/// of a backend this build leaves out (JTREE_WITH_REMOTE=OFF).
Result<const Backend*> find_backend(std::string_view path_or_url);

/// Splits "scheme://rest". False for a plain path: no "://", or text before it that is not a
/// scheme (RFC 3986: a letter, then letters, digits, '+', '-', '.'), as in "runs/a://b".
bool split_scheme(std::string_view s, std::string_view* scheme, std::string_view* rest);

/// Case-insensitive ASCII comparison (schemes).
bool iequals(std::string_view a, std::string_view b);

/// The "file" backend (file_backend.cc).
const Backend& file_backend();

}  // namespace jtree::io
