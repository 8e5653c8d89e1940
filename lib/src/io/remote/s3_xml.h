// The few XML answers of S3 that jtree reads, parsed by a small bounded scanner (no XML
// library: these documents are flat and fixed). Pure functions over text, fuzzed.
//
// Every parser rejects input over kMaxXmlBytes, nesting deeper than kMaxXmlDepth, more than
// kMaxXmlElements elements, DOCTYPEs, unknown entities and mismatched tags with Corruption;
// element text is entity-decoded (&amp; &lt; &gt; &quot; &apos; &#N; &#xN;) and CDATA is taken
// as written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jtree/status.h"

namespace jtree::remote {

inline constexpr size_t kMaxXmlBytes = 16u << 20;
inline constexpr int kMaxXmlDepth = 32;
inline constexpr size_t kMaxXmlElements = 1u << 20;

/// An S3 <Error> document.
struct S3Error {
  std::string code;        ///< "NoSuchKey", "SignatureDoesNotMatch", "SlowDown"...
  std::string message;
  std::string request_id;
  std::string region;      ///< <Region>, sent with AuthorizationHeaderMalformed / redirects
};

/// One <Contents> entry of a ListBucketResult.
struct ListedObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;
};

/// A ListObjectsV2 page.
struct ListBucketPage {
  std::vector<ListedObject> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_continuation_token;
};

/// One <Upload> of a ListMultipartUploadsResult: an incomplete multipart upload.
struct PendingUpload {
  std::string key;
  std::string upload_id;   ///< non-empty
  std::string initiated;   ///< as sent: "2026-11-25T15:40:00.000Z"
};

/// A ListMultipartUploads page.
struct ListUploadsPage {
  std::vector<PendingUpload> uploads;
  bool truncated = false;
  std::string next_key_marker;        ///< with next_upload_id_marker: where the next page starts
  std::string next_upload_id_marker;
};

/// An <Error> document (root element "Error"); Corruption when `xml` is anything else.
Result<S3Error> parse_s3_error(std::string_view xml);

/// InitiateMultipartUploadResult: the UploadId (non-empty).
Result<std::string> parse_initiate_multipart_upload(std::string_view xml);

/// CompleteMultipartUploadResult: the new object's ETag (may be empty: Ceph RGW sends none).
/// An <Error> document (S3 can answer 200 with one) is Corruption here: try parse_s3_error.
Result<std::string> parse_complete_multipart_upload(std::string_view xml);

/// CopyPartResult (UploadPartCopy): the part's ETag (non-empty; RGW omits its quotes).
Result<std::string> parse_copy_part_result(std::string_view xml);

/// ListBucketResult (ListObjectsV2). At most `max_entries` objects plus common prefixes
/// (ResourceExhausted beyond). Sizes must be decimal numbers.
Result<ListBucketPage> parse_list_bucket_result(std::string_view xml,
                                                size_t max_entries = 100'000);

/// ListMultipartUploadsResult. At most `max_entries` uploads (ResourceExhausted beyond);
/// every <Upload> needs a <Key> and a non-empty <UploadId>; a truncated page needs a
/// <NextKeyMarker> (Corruption otherwise: a client following it would loop).
Result<ListUploadsPage> parse_list_multipart_uploads(std::string_view xml,
                                                     size_t max_entries = 100'000);

}  // namespace jtree::remote
