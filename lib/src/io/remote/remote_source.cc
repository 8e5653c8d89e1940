#include "io/remote/remote_source.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "util/thread_pool.h"

namespace jtree::remote {

RemoteSource::RemoteSource(std::unique_ptr<ObjectEndpoint> endpoint, const HttpOptions& options,
                           std::string expected_etag)
    : endpoint_(std::move(endpoint)),
      options_(options),
      pin_(std::move(expected_etag)),
      limiter_(std::max(1, options.max_concurrency)) {
  options_.max_concurrency = std::max(1, options_.max_concurrency);
}

Status RemoteSource::fetch_into(RangeHandler& handler, const std::string& what) {
  CallSpec spec;
  spec.name = endpoint_->name();
  spec.what = what;
  spec.transport = &endpoint_->transport();
  spec.options = &options_;
  spec.stats = &stats_;
  spec.limiter = &limiter_;
  const std::string range = handler.range_header();
  spec.build = [&](HttpRequest& req) {
    req.method = "GET";
    req.headers.push_back(range);
    if (auto im = pin_.if_match_header()) req.headers.push_back(*im);
    return endpoint_->prepare(req);
  };
  spec.map_error = [&](const Attempt& a) { return endpoint_->map_error(a, what); };
  auto head = call(spec, handler);
  if (handler.range_ignored()) range_ignored_.fetch_add(1, std::memory_order_relaxed);
  if (handler.refused_whole_body()) range_refused_.fetch_add(1, std::memory_order_relaxed);
  return head.status();
}

bool RemoteSource::should_download(const Status& st) const {
  return !st.ok() && st.code() == StatusCode::kNotSupported && options_.allow_full_download &&
         range_refused_.load(std::memory_order_relaxed) > 0;
}

std::shared_ptr<const WholeObject> RemoteSource::whole() const {
  std::lock_guard<std::mutex> lock(whole_mu_);
  return whole_;
}

Status RemoteSource::download_whole() {
  // Held during the download: concurrent reads that were refused wait for this one download.
  std::lock_guard<std::mutex> lock(whole_mu_);
  if (whole_) return Status::success();
  CallSpec spec;
  spec.name = endpoint_->name();
  spec.what = "GET (the whole object: the server ignores HTTP Range requests)";
  spec.transport = &endpoint_->transport();
  spec.options = &options_;
  spec.stats = &stats_;
  spec.limiter = &limiter_;
  spec.build = [&](HttpRequest& req) {
    req.method = "GET";
    if (auto im = pin_.if_match_header()) req.headers.push_back(*im);
    return endpoint_->prepare(req);
  };
  spec.map_error = [&](const Attempt& a) { return endpoint_->map_error(a, spec.what); };
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  JTREE_ASSIGN_OR_RETURN(auto w,
                         WholeObject::download(spec, pin_, options_.full_download_max_bytes));
  whole_ = std::move(w);
  full_downloads_.fetch_add(1, std::memory_order_relaxed);
  return Status::success();
}

Status RemoteSource::read_whole(const WholeObject& w, std::span<const ReadRange> ranges) const {
  JTREE_RETURN_IF_ERROR(check_ranges(ranges, w.size()));
  for (const ReadRange& r : ranges) {
    if (!r.dst.empty()) std::memcpy(r.dst.data(), w.bytes().data() + r.offset, r.dst.size());
  }
  return Status::success();
}

Result<uint64_t> RemoteSource::size() {
  if (auto w = whole()) return w->size();
  if (auto s = pin_.size()) return *s;
  std::vector<std::byte> first;
  RangeHandler h(pin_, RangeHandler::Mode::kHead, 1, &first);
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  Status st = fetch_into(h, "GET bytes=0-0");
  if (should_download(st)) {
    JTREE_RETURN_IF_ERROR(download_whole());
    return whole()->size();
  }
  JTREE_RETURN_IF_ERROR(st);
  if (!h.total()) return Status::io_error(name() + ": the server did not tell the object's size");
  return *h.total();
}

Status RemoteSource::check_ranges(std::span<const ReadRange> ranges, uint64_t size) const {
  for (const ReadRange& r : ranges) {
    if (r.offset > size || r.dst.size() > size - r.offset) {
      return Status::io_error(name() + ": unexpected end of file at offset " +
                             std::to_string(r.offset) + " (wanted " +
                             std::to_string(r.dst.size()) + " bytes, object has " +
                             std::to_string(size) + ")");
    }
  }
  return Status::success();
}

std::vector<RemoteSource::Group> RemoteSource::plan(std::span<const ReadRange> ranges) const {
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return ranges[a].offset < ranges[b].offset; });
  const uint64_t max_req = std::max<uint64_t>(options_.max_request_bytes, 1);
  std::vector<Group> groups;
  for (size_t i : order) {
    const ReadRange& r = ranges[i];
    if (r.dst.empty()) continue;
    const uint64_t end = r.offset + r.dst.size();
    if (!groups.empty()) {
      Group& g = groups.back();
      const uint64_t g_end = g.first + g.length;
      // Merge a neighbour (overlapping ranges too: each piece gets its bytes) while the
      // request stays within its size limit.
      if (r.offset <= g_end + options_.coalesce_gap && std::max(end, g_end) - g.first <= max_req &&
          r.offset >= g.pieces.back().offset + g.pieces.back().dst.size()) {
        g.length = std::max(end, g_end) - g.first;
        g.pieces.push_back({r.offset, r.dst});
        continue;
      }
    }
    // A new request, split when larger than the limit.
    for (uint64_t done = 0; done < r.dst.size(); done += max_req) {
      const uint64_t n = std::min<uint64_t>(max_req, r.dst.size() - done);
      groups.push_back({r.offset + done, n, {{r.offset + done, r.dst.subspan(done, n)}}});
    }
  }
  return groups;
}

Status RemoteSource::fetch(const Group& g) {
  RangeHandler h(pin_, g.first, g.length, g.pieces);
  return fetch_into(h, "GET bytes=" + std::to_string(g.first) + "-" +
                           std::to_string(g.first + g.length - 1));
}

Status RemoteSource::read(std::span<const ReadRange> ranges) {
  if (ranges.empty()) return Status::success();
  JTREE_ASSIGN_OR_RETURN(uint64_t size, this->size());
  if (auto w = whole()) return read_whole(*w, ranges);
  JTREE_RETURN_IF_ERROR(check_ranges(ranges, size));
  // Overlapping ranges that cannot share a request are fetched separately (plan() only merges
  // ranges that start after the previous piece ends).
  const std::vector<Group> groups = plan(ranges);
  if (groups.empty()) return Status::success();
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  Status st;
  if (groups.size() == 1) {
    st = fetch(groups[0]);
  } else {
    const int parallelism = static_cast<int>(
        std::min<size_t>(groups.size(), static_cast<size_t>(options_.max_concurrency)));
    st = parallel_for(ThreadPool::shared_io(), groups.size(), parallelism,
                      [&](size_t i) { return fetch(groups[i]); });
  }
  if (should_download(st)) {
    JTREE_RETURN_IF_ERROR(download_whole());
    return read_whole(*whole(), ranges);
  }
  return st;
}

Result<HeadTail> RemoteSource::read_head_tail(uint64_t head_bytes, uint64_t tail_bytes) {
  if (pin_.size() || whole()) return Source::read_head_tail(head_bytes, tail_bytes);
  HeadTail ht;
  if (head_bytes == 0 && tail_bytes == 0) {
    JTREE_ASSIGN_OR_RETURN(ht.size, size());
    return ht;
  }
  // Both requests at once: neither needs the size.
  RangeHandler head(pin_, RangeHandler::Mode::kHead, std::max<uint64_t>(head_bytes, 1), &ht.head);
  std::vector<std::byte> tail_buf;
  RangeHandler tail(pin_, RangeHandler::Mode::kSuffix, std::max<uint64_t>(tail_bytes, 1),
                    &tail_buf);
  const std::string head_what =
      head_bytes == 0 ? std::string() : "GET bytes=0-" + std::to_string(head_bytes - 1);
  const std::string tail_what = "GET bytes=-" + std::to_string(tail_bytes);
  Status head_st, tail_st;
  round_trips_.fetch_add(1, std::memory_order_relaxed);
  if (head_bytes == 0) {
    tail_st = fetch_into(tail, tail_what);
  } else if (tail_bytes == 0) {
    head_st = fetch_into(head, head_what);
  } else {
    Status st = parallel_for(ThreadPool::shared_io(), 2, 2, [&](size_t i) {
      if (i == 0) head_st = fetch_into(head, head_what);
      else tail_st = fetch_into(tail, tail_what);
      return Status::success();
    });
    JTREE_RETURN_IF_ERROR(st);
  }
  if (should_download(head_st) || should_download(tail_st)) {
    JTREE_RETURN_IF_ERROR(download_whole());
    return Source::read_head_tail(head_bytes, tail_bytes);  // served from the download
  }
  JTREE_RETURN_IF_ERROR(head_st);
  if (!tail_st.ok() && !tail.suffix_misserved()) return tail_st;
  const auto total = pin_.size();
  if (!total) return Status::io_error(name() + ": the server did not tell the object's size");
  ht.size = *total;
  if (head_bytes == 0) ht.head.clear();
  if (tail_bytes == 0) return ht;
  if (tail.suffix_misserved()) {
    // A server that answers suffix ranges wrongly: ask for the same bytes explicitly.
    suffix_fallbacks_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t n = std::min(tail_bytes, ht.size);
    ht.tail.resize(n);
    ReadRange r{ht.size - n, ht.tail};
    JTREE_RETURN_IF_ERROR(read(std::span<const ReadRange>(&r, 1)));
    return ht;
  }
  ht.tail = std::move(tail_buf);
  return ht;
}

IoStats RemoteSource::stats() const {
  IoStats s;
  s.read_requests = stats_.requests.load(std::memory_order_relaxed);
  s.bytes_read = stats_.bytes_received.load(std::memory_order_relaxed);
  s.retries = stats_.retries.load(std::memory_order_relaxed);
  return s;
}

RemoteSourceStats RemoteSource::detailed_stats() const {
  RemoteSourceStats s;
  s.io = stats();
  s.connections = stats_.connections.load(std::memory_order_relaxed);
  s.http2_responses = stats_.http2_responses.load(std::memory_order_relaxed);
  s.round_trips = round_trips_.load(std::memory_order_relaxed);
  s.suffix_fallbacks = suffix_fallbacks_.load(std::memory_order_relaxed);
  s.range_ignored = range_ignored_.load(std::memory_order_relaxed);
  s.range_refused = range_refused_.load(std::memory_order_relaxed);
  s.full_downloads = full_downloads_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace jtree::remote
