// The ETag an S3 store gives the object a write makes, predicted by the writer: it tells a
// commit whose reply was lost (the store made the object, the retry was then refused by the
// commit's own condition) from a commit another writer beat.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/remote/s3_client.h"

namespace jtree::remote {

/// The ETag of an object made by one PutObject of `body`: its MD5 in hex, quoted.
std::string put_object_etag(std::span<const std::byte> body);

/// The ETag of an object made by CompleteMultipartUpload of `parts`: the MD5 of the parts'
/// binary MD5s, then "-" and the number of parts, quoted. nullopt when a part's ETag is not an
/// MD5 (objects encrypted with SSE-KMS or SSE-C get other ETags): nothing can be predicted.
std::optional<std::string> multipart_etag(const std::vector<UploadedPart>& parts);

/// Whether two ETags are the same, quoted or not (Ceph RGW keeps them unquoted).
bool same_etag(std::string_view a, std::string_view b);

}  // namespace jtree::remote
