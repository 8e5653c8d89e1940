// The Source of remote objects (http(s):// and s3://): parallel, coalesced range requests
// with retries, a head + suffix-tail open in one round trip, and reads pinned to one version
// of the object. What differs between HTTP and S3 (the URL, signing, error bodies) is an
// ObjectEndpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <semaphore>
#include <string>

#include "io/remote/object_pin.h"
#include "io/remote/range_handler.h"
#include "io/remote/remote_call.h"
#include "io/remote/whole_object.h"
#include "jtree/io.h"
#include "jtree/remote.h"

namespace jtree::remote {

/// How requests for one object are made.
class ObjectEndpoint {
 public:
  virtual ~ObjectEndpoint() = default;
  /// The object's name in messages: the URL, or s3://bucket/key.
  virtual const std::string& name() const = 0;
  /// Completes a request whose method and headers (Range, If-Match) are set: its URL, and for
  /// S3 the signature. Called before every attempt.
  virtual Status prepare(HttpRequest& request) const = 0;
  /// Reads a response the request did not expect (an error status).
  virtual Failure map_error(const Attempt& attempt, const std::string& what) const {
    return http_failure(attempt, what);
  }
  virtual const Transport& transport() const = 0;
};

/// More counters than IoStats has, for tests and benchmarks.
struct RemoteSourceStats {
  IoStats io;
  uint64_t connections = 0;       ///< new connections opened
  uint64_t http2_responses = 0;
  uint64_t round_trips = 0;       ///< batches of parallel requests the caller waited for
  uint64_t suffix_fallbacks = 0;  ///< suffix reads asked again with an explicit range
  uint64_t range_ignored = 0;     ///< answers with the whole object instead of a range
  uint64_t range_refused = 0;     ///< of those, refused: longer than the range asked for
  uint64_t full_downloads = 0;    ///< whole-object downloads (allow_full_download)
};

class RemoteSource final : public Source {
 public:
  RemoteSource(std::unique_ptr<ObjectEndpoint> endpoint, const HttpOptions& options,
               std::string expected_etag = {});

  const std::string& name() const override { return endpoint_->name(); }
  /// Known after the first response; otherwise one request (a GET of byte 0) finds it.
  Result<uint64_t> size() override;
  /// Every range in parallel (up to max_concurrency requests), neighbours closer than
  /// coalesce_gap merged, ranges over max_request_bytes split.
  Status read(std::span<const ReadRange> ranges) override;
  /// The head and the suffix tail at once, without knowing the size first.
  Result<HeadTail> read_head_tail(uint64_t head_bytes, uint64_t tail_bytes) override;
  IoStats stats() const override;
  int preferred_concurrency() const override { return options_.max_concurrency; }
  uint64_t preferred_fetch_bytes() const override { return options_.fetch_bytes; }
  std::string etag() const override { return pin_.etag(); }

  RemoteSourceStats detailed_stats() const;

 private:
  struct Group {
    uint64_t first = 0, length = 0;
    std::vector<Piece> pieces;
  };
  std::vector<Group> plan(std::span<const ReadRange> ranges) const;
  Status fetch(const Group& g);
  Status fetch_into(RangeHandler& handler, const std::string& what);
  Status check_ranges(std::span<const ReadRange> ranges, uint64_t size) const;
  // A server that ignores Range: whether `st` is its refusal and a whole download is allowed.
  bool should_download(const Status& st) const;
  Status download_whole();  // once; later calls return at once
  std::shared_ptr<const WholeObject> whole() const;
  Status read_whole(const WholeObject& w, std::span<const ReadRange> ranges) const;

  std::unique_ptr<ObjectEndpoint> endpoint_;
  HttpOptions options_;
  ObjectPin pin_;
  mutable CallStats stats_;
  std::counting_semaphore<> limiter_;
  std::atomic<uint64_t> round_trips_{0};
  std::atomic<uint64_t> suffix_fallbacks_{0};
  std::atomic<uint64_t> range_ignored_{0};
  std::atomic<uint64_t> range_refused_{0};
  std::atomic<uint64_t> full_downloads_{0};
  // The object downloaded whole (allow_full_download and a server that ignores Range): every
  // read is served from it once it is set.
  mutable std::mutex whole_mu_;
  std::shared_ptr<const WholeObject> whole_;
};

}  // namespace jtree::remote
