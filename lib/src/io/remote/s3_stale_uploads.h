// Incomplete multipart uploads left on S3 by writers that died (a killed process cannot abort
// its upload; its parts stay stored, and billed, until someone does). Every save and commit to
// an s3:// target aborts those of its target and the target's segments once it has committed;
// `jtree clean s3://bucket/key` (remove_stale_temp_files) aborts them by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "io/remote/s3_client.h"

namespace jtree::remote {

/// Whether `key` is `target` itself or one of its segments ("<target>.seg-NNNNN-of-NNNNN",
/// multihost.h's segment_path).
bool is_target_or_segment(std::string_view key, std::string_view target);

/// Milliseconds since the epoch of an S3 timestamp ("2026-11-25T15:40:00.123Z", the
/// fraction optional); nullopt when it is not one.
std::optional<int64_t> parse_s3_time_ms(std::string_view text);

/// Milliseconds since the epoch now (the local clock).
int64_t now_ms();

/// Aborts the incomplete multipart uploads of `target` and of its segments that were
/// initiated before `before_ms` (an upload whose time cannot be read is kept, unless
/// `before_ms` is INT64_MAX: all of them), except the upload `keep`. Lists at most 1000
/// pages. Returns how many it aborted. Errors: those of ListMultipartUploads and
/// AbortMultipartUpload (an upload gone meanwhile is not one).
Result<uint64_t> abort_stale_uploads(S3Client& client, const S3Location& target, int64_t before_ms,
                                     const std::string& keep = {});

}  // namespace jtree::remote
