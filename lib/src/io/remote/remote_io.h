// The entry points of the remote backends that their registrations (http_backend.cc,
// s3_backend.cc) and their own code share.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "jtree/io.h"
#include "jtree/remote.h"

namespace jtree::remote {

/// True for s3:// URLs (case-insensitive scheme).
bool is_s3_url(std::string_view url);

/// A Source for an http(s):// URL. No request is made until the first read.
Result<std::shared_ptr<Source>> open_http_source(std::string_view url,
                                                 const RemoteOptions& options,
                                                 std::string expected_etag = {});
/// A Source for an s3://bucket/key URL. No request is made until the first read.
Result<std::shared_ptr<Source>> open_s3_source(std::string_view url, const RemoteOptions& options,
                                               std::string expected_etag = {});

/// A sink writing a new s3:// object.
Result<std::unique_ptr<Sink>> create_s3_sink(std::string_view url, const SinkOptions& options);

/// A sink writing a new version of an s3:// object whose first `keep_bytes` are the old
/// version's (copied on the server side where S3 allows), committed only over that version
/// (If-Match). See open_append_sink() in io.h.
Result<std::unique_ptr<Sink>> open_s3_append_sink(std::string_view url, uint64_t keep_bytes,
                                                  const SinkOptions& options,
                                                  std::string_view expected_etag);

/// Deletes an s3:// object; NotFound when it does not exist.
Status remove_s3_object(std::string_view url, const RemoteOptions& options = {});

/// Aborts every incomplete multipart upload of an s3:// target and of its segments (what
/// killed writers left; `jtree clean`). Returns how many.
Result<uint64_t> abort_incomplete_uploads(std::string_view url, const RemoteOptions& options);

}  // namespace jtree::remote
