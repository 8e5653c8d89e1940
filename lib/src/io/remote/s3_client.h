// The S3 calls jtree makes, signed with SigV4 (sigv4.h), retried (remote_call.h), their
// answers parsed (s3_xml.h): HEAD, GET ranges (through RemoteSource), PUT, multipart upload
// (create, upload part, upload part copy, complete, abort, list), ListObjectsV2, DeleteObject.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/remote/remote_call.h"
#include "io/remote/s3_config.h"
#include "io/remote/s3_xml.h"

namespace jtree::remote {

/// Completes `req` (method, headers and body set) as an S3 request for bucket/key with the
/// given query parameters: its URL and, unless the configuration is anonymous, the SigV4
/// headers (Host, x-amz-date, x-amz-content-sha256, x-amz-security-token, Authorization) for
/// time `now`. `payload_hash` empty: the SHA-256 of req.body.
void prepare_s3_request(const S3Config& config, std::string_view bucket, std::string_view key,
                        const std::vector<std::pair<std::string, std::string>>& query,
                        std::string payload_hash, HttpRequest& req, int64_t now);

/// Reads an S3 error answer: the XML <Error> (code and message) mapped to a Status
/// (404 NotFound, 403 PermissionDenied naming where the credentials came from, 412 Aborted,
/// 301/400-region errors InvalidArgument naming the bucket's region, 5xx/429/SlowDown/
/// RequestTimeout transient).
Failure s3_failure(const Attempt& attempt, const std::string& what, const S3Config& config,
                   const S3Location& loc);

/// An uploaded part, for CompleteMultipartUpload.
struct UploadedPart {
  int number = 0;
  std::string etag;
};

/// A condition on the object a write replaces, checked by the server when the write completes
/// (PutObject, CompleteMultipartUpload): it closes the window between a writer's own check
/// (HEAD, the append guard) and its commit. A server that fails it answers 412 (Aborted).
struct WriteCondition {
  /// Replace only this version of the object ("If-Match: <etag>"); empty: no such condition.
  std::string if_match;
  /// Create only: fail if the object exists ("If-None-Match: *").
  bool if_none_match = false;

  bool empty() const { return if_match.empty() && !if_none_match; }
  /// The request headers that carry it.
  std::vector<std::string> headers() const;
};

/// The CompleteMultipartUpload request body.
std::string complete_multipart_xml(const std::vector<UploadedPart>& parts);

/// Calls on one S3 service (endpoint + credentials). Thread-safe; counters in `stats`.
class S3Client {
 public:
  S3Client(S3Config config, const RemoteOptions& options);

  const S3Config& config() const { return config_; }
  const RemoteOptions& options() const { return options_; }
  const Transport& transport() const { return transport_; }
  CallStats& stats() { return stats_; }

  /// HEAD: size and ETag. NotFound when absent.
  Result<ObjectInfo> head(const S3Location& loc);
  /// PutObject of a whole (small) object, under `condition` (412: Aborted).
  Status put_object(const S3Location& loc, std::span<const std::byte> body,
                    const WriteCondition& condition = {});
  Status delete_object(const S3Location& loc);
  /// One ListObjectsV2 page.
  Result<ListBucketPage> list_page(const std::string& bucket, const std::string& prefix,
                                   const std::string& continuation_token, int max_keys = 1000);

  /// One ListMultipartUploads page: the incomplete uploads of keys starting with `prefix`,
  /// from (key_marker, upload_id_marker) on (both empty: the first page).
  Result<ListUploadsPage> list_uploads_page(const std::string& bucket, const std::string& prefix,
                                            const std::string& key_marker,
                                            const std::string& upload_id_marker,
                                            int max_uploads = 1000);

  Result<std::string> create_multipart_upload(const S3Location& loc);
  /// Returns the part's ETag. `sha256` of the body, computed by the caller (once, not per
  /// attempt).
  Result<std::string> upload_part(const S3Location& loc, const std::string& upload_id, int part,
                                  std::span<const std::byte> body, const std::string& sha256);
  /// Copies bytes [first, last] of `source` (pinned to `source_etag` when not empty) as part
  /// `part`, on the server side. Returns the part's ETag.
  Result<std::string> upload_part_copy(const S3Location& loc, const std::string& upload_id,
                                       int part, const S3Location& source, uint64_t first,
                                       uint64_t last, const std::string& source_etag);
  /// Returns the new object's ETag (may be empty: RGW). Under `condition` (412: Aborted; the
  /// upload then stays open for the caller to abort).
  Result<std::string> complete_multipart_upload(const S3Location& loc,
                                                const std::string& upload_id,
                                                const std::vector<UploadedPart>& parts,
                                                const WriteCondition& condition = {});
  Status abort_multipart_upload(const S3Location& loc, const std::string& upload_id);

 private:
  struct Call {
    std::string method;
    std::vector<std::pair<std::string, std::string>> query;
    std::vector<std::string> headers;  // "Name: value"
    std::span<const std::byte> body;
    std::string payload_hash;  // empty: hash of body (per attempt)
  };
  Result<ResponseHead> run(const S3Location& loc, const std::string& what, const Call& c,
                           ResponseHandler& handler);

  S3Config config_;
  RemoteOptions options_;
  Transport transport_;
  CallStats stats_;
};

}  // namespace jtree::remote
