// abort_stale_uploads() and its helpers (s3_stale_uploads.h).
#include "io/remote/s3_stale_uploads.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "io/remote/remote_io.h"
#include "io/remote/s3_config.h"

namespace jtree::remote {
namespace {

constexpr int kMaxPages = 1000;

bool digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

bool is_target_or_segment(std::string_view key, std::string_view target) {
  if (key.substr(0, target.size()) != target) return false;
  const std::string_view rest = key.substr(target.size());
  // ".seg-" 5 digits "-of-" 5 digits (segment_path's "%05u", wider past 99999)
  if (rest.empty()) return true;
  if (rest.substr(0, 5) != ".seg-") return false;
  const size_t of = rest.find("-of-", 5);
  if (of == std::string_view::npos) return false;
  return digits(rest.substr(5, of - 5)) && digits(rest.substr(of + 4));
}

std::optional<int64_t> parse_s3_time_ms(std::string_view text) {
  // "YYYY-MM-DDTHH:MM:SS", then an optional ".fff", then "Z".
  if (text.size() < 20 || text.size() > 40 || text.back() != 'Z') return std::nullopt;
  const std::string s(text);
  int y, mo, d, h, mi, sec, n = 0;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
      n != 19) {
    return std::nullopt;
  }
  if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
      sec > 60) {
    return std::nullopt;
  }
  int64_t ms = 0;
  std::string_view frac = std::string_view(s).substr(19, s.size() - 20);
  if (!frac.empty()) {
    if (frac[0] != '.' || !digits(frac.substr(1))) return std::nullopt;
    int64_t scale = 100;
    for (size_t i = 1; i < frac.size() && scale > 0; ++i, scale /= 10) ms += (frac[i] - '0') * scale;
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<uint64_t> abort_stale_uploads(S3Client& client, const S3Location& target, int64_t before_ms,
                                     const std::string& keep) {
  uint64_t aborted = 0;
  std::string key_marker, id_marker;
  for (int page_no = 0; page_no < kMaxPages; ++page_no) {
    JTREE_ASSIGN_OR_RETURN(ListUploadsPage page,
                           client.list_uploads_page(target.bucket, target.key, key_marker,
                                                    id_marker));
    for (const PendingUpload& u : page.uploads) {
      if (u.upload_id == keep || !is_target_or_segment(u.key, target.key)) continue;
      if (before_ms != INT64_MAX) {
        const auto t = parse_s3_time_ms(u.initiated);
        if (!t || *t >= before_ms) continue;  // ours, a newer writer's, or undated: kept
      }
      JTREE_RETURN_IF_ERROR(client.abort_multipart_upload({target.bucket, u.key}, u.upload_id));
      ++aborted;
    }
    if (!page.truncated) return aborted;
    // A server that sends the same markers again would keep us here: stop.
    if (page.next_key_marker == key_marker && page.next_upload_id_marker == id_marker) break;
    key_marker = page.next_key_marker;
    id_marker = page.next_upload_id_marker;
  }
  return Status::io_error(target.url() + ": ListMultipartUploads: the listing does not end");
}

Result<uint64_t> abort_incomplete_uploads(std::string_view url, const RemoteOptions& options) {
  JTREE_ASSIGN_OR_RETURN(S3Location loc, parse_s3_url(url));
  auto config = resolve_s3_config(options, Environment::process());
  if (!config.ok()) return config.status().with_prefix(std::string(url));
  S3Client client(std::move(*config), options);
  return abort_stale_uploads(client, loc, INT64_MAX);
}

}  // namespace jtree::remote
