// s3:// objects for writing. Appended bytes fill a part buffer; a full part is handed to an
// upload thread while the writer fills the next, so at most upload_concurrency parts are in
// flight and memory stays at part_size x (upload_concurrency + 1). An object smaller than one
// part is a single PUT on commit. Nothing is visible before commit(): a multipart upload
// becomes an object only at CompleteMultipartUpload, and any failure aborts it.
#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "io/committing_sink.h"
#include "io/remote/remote_io.h"
#include "io/remote/remote_source.h"
#include "io/remote/s3_client.h"
#include "io/remote/s3_etag.h"
#include "io/remote/s3_stale_uploads.h"
#include "io/remote/sigv4.h"
#include "util/guarded.h"
#include "util/thread_pool.h"

namespace jtree::remote {
namespace {

// S3's limits: parts of 5 MiB to 5 GiB (the last may be smaller), at most 10,000 of them.
constexpr uint64_t kMinPart = 5ull << 20;
constexpr uint64_t kMaxPart = 5ull << 30;
constexpr int kMaxParts = 10000;
// Bytes read through this process at a time when a copy cannot be done on the server.
constexpr uint64_t kCopyPiece = 8ull << 20;

class S3Sink final : public io::CommittingSink {
 public:
  S3Sink(S3Location loc, std::unique_ptr<S3Client> client)
      : loc_(std::move(loc)), name_(loc_.url()), client_(std::move(client)) {
    const RemoteOptions& o = client_->options();
    part_size_ = std::clamp<uint64_t>(o.s3.part_size, kMinPart, kMaxPart);
    concurrency_ = std::max(1, o.s3.upload_concurrency);
  }
  ~S3Sink() override { abort(); }

  const std::string& name() const override { return name_; }
  uint64_t position() const override { return position_; }

  Status append(std::span<const std::byte> data) override {
    JTREE_RETURN_IF_ERROR(check_open());
    while (!data.empty()) {
      const uint64_t target = part_target(next_part_);
      if (buffer_.capacity() < target) buffer_.reserve(target);
      const size_t take = static_cast<size_t>(std::min<uint64_t>(data.size(), target - buffer_.size()));
      buffer_.insert(buffer_.end(), data.begin(), data.begin() + static_cast<ptrdiff_t>(take));
      data = data.subspan(take);
      position_ += take;
      if (buffer_.size() >= target) JTREE_RETURN_IF_ERROR(flush_part());
    }
    return Status::success();
  }

  // Parts are durable on the server once uploaded; the object appears on commit().
  Status sync() override { return check_open(); }

  Status append_from(std::string_view url, uint64_t offset, uint64_t size) override {
    JTREE_RETURN_IF_ERROR(check_open());
    if (!is_s3_url(url)) return Sink::append_from(url, offset, size);
    return copy_from(url, offset, size, "").status();
  }

  // Bytes [offset, offset + size) of an s3:// object, pinned to `etag` (empty: its current
  // version): server-side copy parts where S3's part sizes allow, the rest read through.
  // Returns the ETag of the version copied.
  Result<std::string> copy_from(std::string_view url, uint64_t offset, uint64_t size,
                                std::string etag) {
    JTREE_ASSIGN_OR_RETURN(S3Location src, parse_s3_url(url));
    JTREE_ASSIGN_OR_RETURN(ObjectInfo info, client_->head(src));
    if (!etag.empty() && info.etag != etag) {
      return fail(Status::aborted(src.url() + ": the object changed (ETag " + etag + ", now " +
                                  info.etag + ")"));
    }
    etag = info.etag;
    if (offset > info.size || size > info.size - offset) {
      return fail(Status::io_error(src.url() + ": bytes [" + std::to_string(offset) + ", +" +
                                  std::to_string(size) + ") are past its end (" +
                                  std::to_string(info.size) + " bytes)"));
    }
    uint64_t pos = offset;
    const uint64_t end = offset + size;
    // A part shorter than 5 MiB may only be the last one: top the buffer up through this
    // process first, so that it can be a part of its own.
    if (!buffer_.empty() && buffer_.size() < kMinPart) {
      const uint64_t k = std::min<uint64_t>(kMinPart - buffer_.size(), end - pos);
      JTREE_RETURN_IF_ERROR(read_through(url, etag, pos, k));
      pos += k;
    }
    if (end - pos >= kMinPart) {
      if (!buffer_.empty()) JTREE_RETURN_IF_ERROR(flush_part());
      while (end - pos >= kMinPart) {
        uint64_t n = std::min(end - pos, kMaxPart);
        if (end - pos - n > 0 && end - pos - n < kMinPart) n = end - pos - kMinPart;
        JTREE_RETURN_IF_ERROR(copy_part(src, etag, pos, n));
        pos += n;
      }
    }
    if (pos < end) JTREE_RETURN_IF_ERROR(read_through(url, etag, pos, end - pos));
    return etag;
  }

  /// The condition the object must meet when this sink commits (checked by the server, so
  /// that nothing between the writer's own check and the commit can slip in).
  void set_commit_condition(WriteCondition c) { condition_ = std::move(c); }

  // Committed: the incomplete uploads that earlier writers of this target (or of its
  // segments) left when they were killed are aborted, so that their parts stop being
  // stored. Only those initiated before this sink was created: a writer that started after
  // it may still be running. Best effort: the object is committed whatever happens here
  // (a store that refuses ListMultipartUploads leaves them to `jtree clean` or lifecycle
  // rules).
  // (Its own client: the write's request counts are the object's upload alone.)
  void committed() override {
    S3Client cleaner(client_->config(), client_->options());
    (void)abort_stale_uploads(cleaner, loc_, started_ms_, completed_upload_);
  }

  void abort() noexcept override {
    if (closed_) return;
    closed_ = true;
    wait_idle();
    if (!upload_id_.empty()) {
      // Best effort: a failure leaves an incomplete upload (invisible; S3 lifecycle rules
      // remove those), never a partial object.
      (void)client_->abort_multipart_upload(loc_, upload_id_);
      upload_id_.clear();
    }
    buffer_.clear();
    buffer_.shrink_to_fit();
  }

  IoStats stats() const override {
    IoStats s;
    CallStats& c = client_->stats();
    s.write_requests = c.requests.load(std::memory_order_relaxed);
    s.bytes_written = c.bytes_sent.load(std::memory_order_relaxed);
    s.retries = c.retries.load(std::memory_order_relaxed);
    return s;
  }

  /// Refuses to replace an existing object (SinkOptions::overwrite = false).
  Status check_absent() {
    auto info = client_->head(loc_);
    if (info.ok()) return Status::already_exists(name_ + ": the object exists");
    return info.status().is_not_found() ? Status::success() : info.status();
  }

 private:
  // Parts grow x2 every 1000 parts: 10,000 parts reach far beyond any checkpoint.
  uint64_t part_target(int part) const {
    const int doublings = std::min(9, (part - 1) / 1000);
    return std::min(kMaxPart, part_size_ << doublings);
  }

  Status check_open() {
    if (closed_) return Status::invalid_argument(name_ + ": sink is closed");
    return write_error();
  }

  Status write_error() override {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

  Status fail(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) error_ = st;
    return st;
  }

  Status start_upload() {
    if (!upload_id_.empty()) return Status::success();
    auto id = client_->create_multipart_upload(loc_);
    if (!id.ok()) return fail(id.status());
    upload_id_ = *id;
    pool_ = std::make_unique<ThreadPool>(concurrency_);
    return Status::success();
  }

  // Takes the next part number once a slot is free (at most concurrency_ in flight).
  Result<int> reserve_part() {
    JTREE_RETURN_IF_ERROR(start_upload());
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ < concurrency_ || !error_.ok(); });
    if (!error_.ok()) return error_;
    if (next_part_ > kMaxParts) {
      error_ = Status::resource_exhausted(name_ + ": more than 10,000 parts");
      return error_;
    }
    ++in_flight_;
    parts_.resize(static_cast<size_t>(next_part_));
    return next_part_++;
  }

  void part_done(int part, Result<std::string> etag) {
    std::lock_guard<std::mutex> lock(mu_);
    if (etag.ok()) {
      parts_[static_cast<size_t>(part - 1)] = {part, *etag};
    } else if (error_.ok()) {
      error_ = etag.status();
    }
    --in_flight_;
    cv_.notify_all();
  }

  // Hands the buffer to an upload thread as the next part.
  Status flush_part() {
    JTREE_ASSIGN_OR_RETURN(int part, reserve_part());
    auto body = std::make_shared<std::vector<std::byte>>(std::move(buffer_));
    buffer_ = {};
    pool_->submit([this, part, body] {
      part_done(part, guarded([&] {
                  return client_->upload_part(loc_, upload_id_, part, *body, sha256_hex(*body));
                }));
    });
    return Status::success();
  }

  Status copy_part(const S3Location& src, const std::string& etag, uint64_t first, uint64_t n) {
    JTREE_ASSIGN_OR_RETURN(int part, reserve_part());
    position_ += n;
    pool_->submit([this, part, src, etag, first, n] {
      part_done(part, guarded([&] {
                  return client_->upload_part_copy(loc_, upload_id_, part, src, first,
                                                   first + n - 1, etag);
                }));
    });
    return Status::success();
  }

  // Appends bytes of an s3:// object read through this process (pinned to `etag`).
  Status read_through(std::string_view url, const std::string& etag, uint64_t offset,
                      uint64_t size) {
    auto src = open_s3_source(url, client_->options(), etag);
    if (!src.ok()) return fail(src.status());
    std::vector<std::byte> piece(static_cast<size_t>(std::min(size, kCopyPiece)));
    for (uint64_t done = 0; done < size;) {
      const uint64_t n = std::min(kCopyPiece, size - done);
      ReadRange r{offset + done, std::span(piece).first(static_cast<size_t>(n))};
      Status st = (*src)->read(std::span<const ReadRange>(&r, 1));
      if (!st.ok()) return fail(st);
      JTREE_RETURN_IF_ERROR(append(r.dst));
      done += n;
    }
    return Status::success();
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ == 0; });
  }

  // One PUT, or the last part and CompleteMultipartUpload.
  Status finish() override {
    if (!upload_id_.empty()) {
      if (!buffer_.empty()) JTREE_RETURN_IF_ERROR(flush_part());  // the last part may be small
      wait_idle();
      JTREE_RETURN_IF_ERROR(check_open());
    }
    Status st = send_commit(condition_);
    if (st.code() == StatusCode::kAborted && !condition_.empty()) {
      auto now = client_->head(loc_);
      WriteCondition bare = condition_;
      bare.if_match = unquoted(condition_.if_match);
      if (now.ok() && made_by_this_commit(*now)) {
        // The store made the object, but its reply was lost and the HTTP layer's retry of
        // the same request was refused by the condition, which the first attempt had
        // changed: committed, not beaten by another writer.
        st = Status::success();
      } else if (now.ok() && !condition_.if_match.empty() && now->etag == condition_.if_match &&
                 bare.if_match != condition_.if_match) {
        // Some stores (Ceph RGW) compare If-Match with the ETag they keep, which has no
        // quotes, and so refuse the quoted form HTTP prescribes even for an unchanged object.
        // A 412 while the object still has the planned ETag is that, not another writer: ask
        // again with the bare value (the server still checks it atomically).
        st = send_commit(bare);
      }
    }
    if (!st.ok()) return condition_failed(st);
    if (!upload_id_.empty()) completed_upload_ = std::move(upload_id_);
    upload_id_.clear();  // complete: nothing to abort
    return Status::success();
  }

  // The request that makes the object: PutObject of the buffer (small objects), or
  // CompleteMultipartUpload; under `condition`.
  Status send_commit(const WriteCondition& condition) {
    if (upload_id_.empty()) return client_->put_object(loc_, buffer_, condition);
    return client_->complete_multipart_upload(loc_, upload_id_, parts_, condition).status();
  }

  // Whether `now` (a HEAD after a refused commit) is the object this commit makes: its size
  // and the ETag the store gives such a write (S3's MD5-based ETags; stores whose ETags are
  // not, such as SSE-KMS objects, never match, and the refusal stands).
  bool made_by_this_commit(const ObjectInfo& now) const {
    if (now.size != position_) return false;
    if (upload_id_.empty()) return same_etag(now.etag, put_object_etag(buffer_));
    const std::optional<std::string> expected = multipart_etag(parts_);
    return expected && same_etag(now.etag, *expected);
  }

  static std::string unquoted(const std::string& etag) {
    if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
      return etag.substr(1, etag.size() - 2);
    }
    return etag;
  }

  // A commit refused by the server's check of condition_ (Aborted: 412, or 409 for a
  // conditional write racing another) says what the writer's own check would have said.
  Status condition_failed(Status st) const {
    if (st.ok() || st.code() != StatusCode::kAborted || condition_.empty()) return st;
    if (!condition_.if_match.empty()) {
      return Status::aborted(name_ + ": the file changed since this append was planned (ETag " +
                             condition_.if_match + " no longer current at commit: " +
                             st.message() + "): another writer appended or replaced it; "
                             "nothing written (plan again against the new generation)");
    }
    return Status::already_exists(name_ + ": the object exists (another writer created it "
                                 "while this one was writing: " + st.message() +
                                 "); nothing written");
  }

  const S3Location loc_;
  const std::string name_;
  std::unique_ptr<S3Client> client_;
  const int64_t started_ms_ = now_ms();  // uploads of this target older than this are stale
  uint64_t part_size_ = 0;
  int concurrency_ = 1;
  uint64_t position_ = 0;
  std::vector<std::byte> buffer_;  // appended bytes not yet handed to a part
  std::string upload_id_;
  std::string completed_upload_;  // the upload commit() completed (not stale)
  WriteCondition condition_;  // checked by the server on commit

  std::mutex mu_;
  std::condition_variable cv_;
  int next_part_ = 1;
  int in_flight_ = 0;
  std::vector<UploadedPart> parts_;  // by part number - 1
  Status error_;                     // the first failure; sticks
  std::unique_ptr<ThreadPool> pool_;  // last: its threads stop before the members they use
};

Result<std::unique_ptr<S3Sink>> make_sink(std::string_view url, const SinkOptions& options) {
  JTREE_ASSIGN_OR_RETURN(S3Location loc, parse_s3_url(url));
  auto config = resolve_s3_config(options.remote, Environment::process());
  if (!config.ok()) return config.status().with_prefix(std::string(url));
  return std::make_unique<S3Sink>(std::move(loc),
                                  std::make_unique<S3Client>(std::move(*config), options.remote));
}

}  // namespace

Result<std::unique_ptr<Sink>> create_s3_sink(std::string_view url, const SinkOptions& options) {
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<S3Sink> sink, make_sink(url, options));
  if (!options.overwrite) {
    // Checked now (an early, clear error) and again by the server on commit (If-None-Match),
    // so that an object created by another writer in between is not replaced.
    JTREE_RETURN_IF_ERROR(sink->check_absent());
    WriteCondition c;
    c.if_none_match = true;
    sink->set_commit_condition(std::move(c));
  }
  return std::unique_ptr<Sink>(std::move(sink));
}

Result<std::unique_ptr<Sink>> open_s3_append_sink(std::string_view url, uint64_t keep_bytes,
                                                  const SinkOptions& options,
                                                  std::string_view expected_etag) {
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<S3Sink> sink, make_sink(url, options));
  // The new version starts as a copy of the old one's committed bytes, and replaces exactly
  // that version: two appends finishing at once cannot both commit (If-Match on commit).
  JTREE_ASSIGN_OR_RETURN(std::string copied,
                         sink->copy_from(url, 0, keep_bytes, std::string(expected_etag)));
  WriteCondition c;
  c.if_match = std::move(copied);
  sink->set_commit_condition(std::move(c));
  return std::unique_ptr<Sink>(std::move(sink));
}

}  // namespace jtree::remote
