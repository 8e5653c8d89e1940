#include "io/remote/range_handler.h"

#include <algorithm>
#include <cstring>

#include "io/remote/content_range.h"

namespace jtree::remote {
namespace {

std::string range_text(uint64_t first, uint64_t end) {
  return std::to_string(first) + "-" + std::to_string(end - 1);
}

}  // namespace

RangeHandler::RangeHandler(ObjectPin& pin, uint64_t first, uint64_t length,
                           std::vector<Piece> pieces)
    : pin_(pin), mode_(Mode::kRange), first_(first), length_(length), pieces_(std::move(pieces)) {}

RangeHandler::RangeHandler(ObjectPin& pin, Mode mode, uint64_t length, std::vector<std::byte>* out)
    : pin_(pin), mode_(mode), first_(0), length_(length), out_(out) {}

std::string RangeHandler::range_header() const {
  if (mode_ == Mode::kSuffix) return "Range: bytes=-" + std::to_string(length_);
  return "Range: bytes=" + range_text(first_, first_ + length_);
}

void RangeHandler::reset() {
  ResponseHandler::reset();
  status_ = 0;
  total_.reset();
  origin_ = received_ = 0;
  expected_.reset();
  want_first_ = want_end_ = 0;
  cursor_ = 0;
  unknown_length_ = false;
  suffix_misserved_ = false;
  refused_ = false;
}

Status RangeHandler::fail(Status st, bool transient) {
  transient_error = transient;
  return st;
}

Status RangeHandler::refuse_whole_body() {
  refused_ = true;
  const std::string size =
      expected_ ? " of " + std::to_string(*expected_) + " bytes" : std::string();
  return fail(Status::not_supported(
      "server ignores HTTP Range requests (answered 200 with the whole body" + size +
      "); pass allow_full_download / --allow-full-download to download it whole"));
}

Status RangeHandler::on_head(const ResponseHead& head) {
  status_ = head.status;
  // Ranges of an encoded representation are not ranges of the file.
  if (const std::string* enc = head.find("content-encoding");
      enc != nullptr && !enc->empty() && *enc != "identity") {
    return fail(Status::io_error("the server sent Content-Encoding \"" + enc->substr(0, 40) +
                                "\", which jtree did not ask for"));
  }
  const std::string* cr_text = head.find("content-range");
  std::optional<ContentRange> cr;
  if (cr_text != nullptr) {
    auto parsed = parse_content_range(*cr_text);
    if (!parsed.ok()) return fail(Status::io_error("HTTP " + std::to_string(status_) + ": " +
                                                  parsed.status().message()));
    cr = *parsed;
  }

  if (status_ == 416) {
    if (cr && cr->total) {
      total_ = cr->total;
    } else if (mode_ != Mode::kRange) {
      // A range from byte 0, or a non-empty suffix, is unsatisfiable only for an empty
      // object (RFC 9110, 14.1.2); some servers (Ceph RGW) do not say so in Content-Range.
      total_ = 0;
    } else {
      return fail(Status::io_error("HTTP 416 (range not satisfiable) without the object's size"));
    }
    JTREE_RETURN_IF_ERROR(fail(pin_.check(head, total_)));
    if (mode_ != Mode::kRange && *total_ == 0) {
      if (out_ != nullptr) out_->clear();
      return Status::success();  // an empty object: nothing to read
    }
    return fail(Status::io_error("HTTP 416: range " + range_text(first_, first_ + length_) +
                                " not satisfiable; the object has " + std::to_string(*total_) +
                                " bytes"));
  }

  if (status_ == 206) {
    if (!cr || !cr->has_range) {
      return fail(Status::io_error("HTTP 206 without a usable Content-Range"));
    }
    total_ = cr->total;
    if (!total_) total_ = pin_.size();
    JTREE_RETURN_IF_ERROR(fail(pin_.check(head, cr->total)));
    origin_ = cr->first;
    expected_ = cr->length();
    if (auto cl = head.content_length(); cl && *cl != *expected_) {
      return fail(Status::io_error("Content-Length " + std::to_string(*cl) +
                                  " disagrees with Content-Range " + *cr_text));
    }
  } else {  // 200: the whole object; the server ignored the Range header.
    expected_ = head.content_length();
    // Taken only when no longer than what was asked (a small object): otherwise the transfer
    // stops here, before any body byte, rather than becoming a silent whole-file download.
    if (expected_ && *expected_ > length_) return refuse_whole_body();
    total_ = expected_;
    JTREE_RETURN_IF_ERROR(fail(pin_.check(head, total_)));
    origin_ = 0;
    unknown_length_ = !expected_;
  }

  // What we want of the object, now that its size may be known.
  switch (mode_) {
    case Mode::kRange:
      want_first_ = first_;
      want_end_ = first_ + length_;
      if (total_ && *total_ < want_end_) {
        return fail(Status::io_error("the object has " + std::to_string(*total_) +
                                    " bytes; bytes " + range_text(want_first_, want_end_) +
                                    " were asked for"));
      }
      break;
    case Mode::kHead:
      want_first_ = 0;
      want_end_ = total_ ? std::min(length_, *total_) : length_;
      break;
    case Mode::kSuffix:
      if (!total_) {
        if (status_ == 206) return fail(Status::io_error("a suffix range without the object's size"));
        // A 200 of unknown length, at most length_ bytes: all of it is the tail.
        want_first_ = 0;
        want_end_ = length_;
        break;
      }
      want_end_ = *total_;
      want_first_ = want_end_ - std::min(length_, *total_);
      break;
  }
  if (status_ == 206) {
    const uint64_t last_end = origin_ + *expected_;
    const bool covers = origin_ <= want_first_ && last_end >= want_end_;
    if (mode_ == Mode::kSuffix && !covers) {
      suffix_misserved_ = true;  // the caller asks again with an explicit range
      return fail(Status::io_error("a suffix range \"bytes=-" + std::to_string(length_) +
                                  "\" was answered with " + *cr_text));
    }
    // Bytes before our first one are fine (skipped); missing ones are not. (A head request
    // may end early: the object is shorter.)
    const bool short_head = mode_ == Mode::kHead && origin_ == 0 && total_ &&
                            last_end == std::min(want_end_, *total_);
    if (!covers && !short_head) {
      return fail(Status::io_error("the server sent bytes " + *cr_text + " for a request of " +
                                  range_text(want_first_, want_end_)));
    }
  }
  if (out_ != nullptr) out_->assign(want_end_ - want_first_, std::byte{0});
  return Status::success();
}

void RangeHandler::place(uint64_t pos, std::span<const std::byte> data) {
  // Clip to the wanted range.
  const uint64_t end = pos + data.size();
  const uint64_t a = std::max(pos, want_first_), b = std::min(end, want_end_);
  if (a >= b) return;
  data = data.subspan(a - pos, b - a);
  pos = a;
  if (mode_ != Mode::kRange) {
    std::memcpy(out_->data() + (pos - want_first_), data.data(), data.size());
    return;
  }
  while (!data.empty() && cursor_ < pieces_.size()) {
    const Piece& p = pieces_[cursor_];
    const uint64_t p_end = p.offset + p.dst.size();
    if (pos >= p_end) {
      ++cursor_;
      continue;
    }
    if (pos < p.offset) {  // a gap between coalesced pieces: discard
      const uint64_t skip = std::min<uint64_t>(p.offset - pos, data.size());
      data = data.subspan(skip);
      pos += skip;
      continue;
    }
    const uint64_t n = std::min<uint64_t>(p_end - pos, data.size());
    std::memcpy(p.dst.data() + (pos - p.offset), data.data(), n);
    data = data.subspan(n);
    pos += n;
  }
}

Status RangeHandler::on_body(std::span<const std::byte> data) {
  if (expected_ && data.size() > *expected_ - received_) {
    return fail(Status::io_error("the body is longer than the " + std::to_string(*expected_) +
                                " bytes announced"));
  }
  // A 200 of unknown length stops as soon as it passes the bytes asked for.
  if (unknown_length_ && data.size() > length_ - received_) return refuse_whole_body();
  place(position(), data);
  received_ += data.size();
  return Status::success();
}

bool RangeHandler::satisfied() const {
  // Stop early only when more is still coming (an exact answer is read to its end, so that
  // the connection can be reused).
  if (unknown_length_ || status_ == 416) return false;
  return position() >= want_end_ && (!expected_ || received_ < *expected_);
}

Status RangeHandler::on_done() {
  if (status_ == 416) return Status::success();
  if (unknown_length_) {  // a 200 of unknown length, read to its end: its length is the size
    total_ = received_;
    JTREE_RETURN_IF_ERROR(fail(pin_.check({}, total_)));
    if (mode_ == Mode::kRange) {
      if (want_end_ > received_) {
        return fail(Status::io_error("the object has " + std::to_string(received_) +
                                    " bytes; bytes " + range_text(want_first_, want_end_) +
                                    " were asked for"));
      }
      return Status::success();
    }
    // kHead and kSuffix: the object is no longer than length_, so all of it is wanted.
    want_end_ = received_;
    out_->resize(received_);
    return Status::success();
  }
  const bool stopped = satisfied();
  if (!stopped && expected_ && received_ < *expected_) {
    return fail(Status::io_error("the body ended after " + std::to_string(received_) + " of " +
                                std::to_string(*expected_) + " bytes announced"),
                true);
  }
  if (position() < want_end_) {
    return fail(Status::io_error("the body ended at offset " + std::to_string(position()) +
                                " before the end of the range " +
                                range_text(want_first_, want_end_)),
                true);
  }
  if (mode_ == Mode::kHead && total_ && origin_ == 0 && want_end_ > *total_) {
    want_end_ = *total_;
    out_->resize(want_end_);
  }
  return Status::success();
}

}  // namespace jtree::remote
