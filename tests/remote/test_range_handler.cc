// The range-response handler, fed responses the way HttpClient would: well-behaved servers,
// servers that ignore Range, mis-serve suffixes, send the wrong range, truncate, change the
// object mid-read.
#include <cstring>

#include <doctest/doctest.h>

#include "io/remote/range_handler.h"

using namespace jtree;
using namespace jtree::remote;

namespace {

std::vector<std::byte> object(size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + 7) & 0xff);
  return v;
}

ResponseHead head(long status, std::vector<std::pair<std::string, std::string>> headers) {
  ResponseHead h;
  h.status = status;
  h.headers = std::move(headers);
  return h;
}

// Feeds `body` in chunks of `chunk` bytes as HttpClient does, stopping when the handler is
// satisfied; returns on_done()'s status (or the first error).
Status feed(RangeHandler& h, const ResponseHead& rh, std::span<const std::byte> body,
            size_t chunk = 7) {
  h.reset();
  REQUIRE(h.accepts(rh.status));
  JTREE_RETURN_IF_ERROR(h.on_head(rh));
  for (size_t i = 0; i < body.size(); i += chunk) {
    JTREE_RETURN_IF_ERROR(h.on_body(body.subspan(i, std::min(chunk, body.size() - i))));
    if (h.satisfied()) break;
  }
  return h.on_done();
}

std::string cr(uint64_t a, uint64_t b, uint64_t total) {
  return "bytes " + std::to_string(a) + "-" + std::to_string(b) + "/" + std::to_string(total);
}

}  // namespace

TEST_CASE("ranges: an exact 206, coalesced pieces with a gap discarded") {
  const auto obj = object(1000);
  ObjectPin pin;
  std::vector<std::byte> a(10), b(20);
  RangeHandler h(pin, 100, 130, {{100, a}, {210, b}});
  CHECK(h.range_header() == "Range: bytes=100-229");
  auto body = std::span(obj).subspan(100, 130);
  auto rh = head(206, {{"content-range", cr(100, 229, 1000)}, {"content-length", "130"},
                       {"etag", "\"v1\""}});
  REQUIRE(feed(h, rh, body).ok());
  CHECK(std::memcmp(a.data(), obj.data() + 100, 10) == 0);
  CHECK(std::memcmp(b.data(), obj.data() + 210, 20) == 0);
  CHECK(*h.total() == 1000);
  CHECK(pin.etag() == "\"v1\"");
  CHECK(*pin.size() == 1000);
  CHECK(*pin.if_match_header() == "If-Match: \"v1\"");
}

TEST_CASE("ranges: a server that ignores Range (200 with more than asked) is refused at its head") {
  ObjectPin pin;
  std::vector<std::byte> dst(100);
  RangeHandler h(pin, 300, 100, {{300, dst}});
  h.reset();
  // Refused before any body byte: the caller stops the transfer.
  Status st = h.on_head(head(200, {{"content-length", "5000"}, {"etag", "\"v1\""}}));
  CHECK(st.code() == StatusCode::kNotSupported);
  CHECK(st.message().find("server ignores HTTP Range requests (answered 200 with the whole "
                          "body of 5000 bytes); pass allow_full_download / "
                          "--allow-full-download to download it whole") != std::string::npos);
  CHECK_FALSE(h.transient_error);
  CHECK(h.range_ignored());
  CHECK(h.refused_whole_body());
  CHECK_FALSE(pin.size());  // nothing of a refused answer is adopted
  // Without Content-Length (chunked), refused as soon as the body passes the bytes asked for.
  h.reset();
  CHECK_FALSE(h.refused_whole_body());
  const auto obj = object(5000);
  REQUIRE(h.on_head(head(200, {})).ok());
  CHECK_FALSE(h.satisfied());
  REQUIRE(h.on_body(std::span(obj).first(60)).ok());
  st = h.on_body(std::span(obj).subspan(60, 60));
  CHECK(st.code() == StatusCode::kNotSupported);
  CHECK(h.refused_whole_body());
}

TEST_CASE("ranges: a 200 no longer than the range asked for (a small object) is used") {
  const auto obj = object(80);
  ObjectPin pin;
  std::vector<std::byte> dst(30);
  RangeHandler h(pin, 0, 100, {{10, dst}});
  REQUIRE(h.accepts(200));
  // The object has 80 bytes: a request of 100 from byte 0 asks more than it has.
  Status st = feed(h, head(200, {{"content-length", "80"}}), obj);
  CHECK(st.message().find("the object has 80 bytes") != std::string::npos);
  CHECK_FALSE(h.refused_whole_body());
  ObjectPin pin2;
  RangeHandler h2(pin2, 0, 80, {{10, dst}});
  REQUIRE(feed(h2, head(200, {{"content-length", "80"}}), obj).ok());
  CHECK(h2.range_ignored());
  CHECK(std::memcmp(dst.data(), obj.data() + 10, 30) == 0);
  // Of unknown length too: its end tells the size.
  ObjectPin pin3;
  RangeHandler h3(pin3, 0, 80, {{10, dst}});
  REQUIRE(feed(h3, head(200, {}), obj).ok());
  CHECK(*h3.total() == 80);
}

TEST_CASE("ranges: wrong or inconsistent answers are errors, not data") {
  const auto obj = object(1000);
  std::vector<std::byte> dst(50);
  auto body = std::span(obj).subspan(100, 50);
  {
    ObjectPin pin;
    RangeHandler h(pin, 100, 50, {{100, dst}});
    // The server sends other bytes than asked.
    Status st = feed(h, head(206, {{"content-range", cr(200, 249, 1000)}}), body);
    CHECK_FALSE(st.ok());
    CHECK_FALSE(h.transient_error);
    CHECK(st.message().find("for a request of 100-149") != std::string::npos);
  }
  {
    ObjectPin pin;
    RangeHandler h(pin, 100, 50, {{100, dst}});
    CHECK_FALSE(feed(h, head(206, {}), body).ok());  // no Content-Range
    CHECK_FALSE(feed(h, head(206, {{"content-range", "bytes 100-149/1000"},
                                   {"content-length", "49"}}),
                     body)
                    .ok());  // Content-Length disagrees
    CHECK_FALSE(feed(h, head(206, {{"content-range", "bytes 100-149/1000"},
                                   {"content-encoding", "gzip"}}),
                     body)
                    .ok());
    // A body longer than announced.
    auto longer = std::span(obj).subspan(100, 60);
    CHECK_FALSE(feed(h, head(206, {{"content-range", cr(100, 149, 1000)}}), longer).ok());
  }
  {
    ObjectPin pin;
    RangeHandler h(pin, 100, 50, {{100, dst}});
    // A truncated body: worth a retry.
    Status st = feed(h, head(206, {{"content-range", cr(100, 149, 1000)}}), body.first(30));
    CHECK_FALSE(st.ok());
    CHECK(h.transient_error);
    CHECK(st.message().find("30 of 50") != std::string::npos);
    // Then a whole answer succeeds.
    CHECK(feed(h, head(206, {{"content-range", cr(100, 149, 1000)}}), body).ok());
  }
  {
    ObjectPin pin;
    RangeHandler h(pin, 900, 200, {});
    Status st = feed(h, head(416, {{"content-range", "bytes */1000"}}), {});
    CHECK_FALSE(st.ok());
    CHECK(st.message().find("the object has 1000 bytes") != std::string::npos);
  }
}

TEST_CASE("ranges: the pin catches a replaced object") {
  const auto obj = object(1000);
  std::vector<std::byte> dst(10);
  ObjectPin pin;
  RangeHandler h(pin, 0, 10, {{0, dst}});
  REQUIRE(feed(h, head(206, {{"content-range", cr(0, 9, 1000)}, {"etag", "\"a\""}}),
               std::span(obj).first(10))
              .ok());
  Status st = feed(h, head(206, {{"content-range", cr(0, 9, 1000)}, {"etag", "\"b\""}}),
                   std::span(obj).first(10));
  CHECK(st.code() == StatusCode::kAborted);
  CHECK(st.message().find("changed while being read") != std::string::npos);
  // Same ETag, another size: changed too.
  st = feed(h, head(206, {{"content-range", cr(0, 9, 2000)}, {"etag", "\"a\""}}),
            std::span(obj).first(10));
  CHECK(st.code() == StatusCode::kAborted);
  // Without ETags, Last-Modified pins.
  ObjectPin lm;
  RangeHandler h2(lm, 0, 10, {{0, dst}});
  REQUIRE(feed(h2, head(206, {{"content-range", cr(0, 9, 1000)}, {"last-modified", "Mon"}}),
               std::span(obj).first(10))
              .ok());
  CHECK(feed(h2, head(206, {{"content-range", cr(0, 9, 1000)}, {"last-modified", "Tue"}}),
             std::span(obj).first(10))
            .code() == StatusCode::kAborted);
  CHECK_FALSE(lm.if_match_header().has_value());
  // Weak ETags are compared, but not sent in If-Match.
  ObjectPin weak;
  RangeHandler h3(weak, 0, 10, {{0, dst}});
  REQUIRE(feed(h3, head(206, {{"content-range", cr(0, 9, 1000)}, {"etag", "W/\"w\""}}),
               std::span(obj).first(10))
              .ok());
  CHECK_FALSE(weak.if_match_header().has_value());
  // A version known in advance must be the one served.
  ObjectPin expected("\"old\"");
  RangeHandler h4(expected, 0, 10, {{0, dst}});
  CHECK(feed(h4, head(206, {{"content-range", cr(0, 9, 1000)}, {"etag", "\"new\""}}),
             std::span(obj).first(10))
            .code() == StatusCode::kAborted);
}

TEST_CASE("head and suffix reads: 206, short objects, empty objects") {
  const auto obj = object(1000);
  {
    ObjectPin pin;
    std::vector<std::byte> out;
    RangeHandler h(pin, RangeHandler::Mode::kHead, 64, &out);
    CHECK(h.range_header() == "Range: bytes=0-63");
    REQUIRE(feed(h, head(206, {{"content-range", cr(0, 63, 1000)}}), std::span(obj).first(64))
                .ok());
    CHECK(out == std::vector<std::byte>(obj.begin(), obj.begin() + 64));
  }
  {
    ObjectPin pin;
    std::vector<std::byte> out;
    RangeHandler h(pin, RangeHandler::Mode::kHead, 4096, &out);  // more than the object has
    REQUIRE(feed(h, head(206, {{"content-range", cr(0, 999, 1000)}}), obj).ok());
    CHECK(out == obj);
  }
  {
    ObjectPin pin;
    std::vector<std::byte> out;
    RangeHandler h(pin, RangeHandler::Mode::kSuffix, 100, &out);
    CHECK(h.range_header() == "Range: bytes=-100");
    REQUIRE(feed(h, head(206, {{"content-range", cr(900, 999, 1000)}}),
                 std::span(obj).subspan(900))
                .ok());
    CHECK(out == std::vector<std::byte>(obj.begin() + 900, obj.end()));
  }
  {
    ObjectPin pin;
    std::vector<std::byte> out;
    RangeHandler h(pin, RangeHandler::Mode::kSuffix, 4096, &out);  // the whole object
    REQUIRE(feed(h, head(206, {{"content-range", cr(0, 999, 1000)}}), obj).ok());
    CHECK(out == obj);
  }
  {
    ObjectPin pin;
    std::vector<std::byte> out(3);
    RangeHandler h(pin, RangeHandler::Mode::kHead, 64, &out);
    REQUIRE(feed(h, head(416, {{"content-range", "bytes */0"}}), {}).ok());
    CHECK(out.empty());
    CHECK(*h.total() == 0);
  }
}

TEST_CASE("suffix reads: mis-served suffixes are detected; 200 answers longer than asked are refused") {
  const auto obj = object(10000);
  {
    // npm s3rver's answer to bytes=-100: the first 101 bytes.
    ObjectPin pin;
    std::vector<std::byte> out;
    RangeHandler h(pin, RangeHandler::Mode::kSuffix, 100, &out);
    Status st = feed(h, head(206, {{"content-range", cr(0, 100, 10000)}}),
                     std::span(obj).first(101));
    CHECK_FALSE(st.ok());
    CHECK(h.suffix_misserved());
    CHECK_FALSE(h.transient_error);
    CHECK(*pin.size() == 10000);  // what the caller needs to ask again explicitly
  }
  {
    // The whole object for a suffix: refused, not read to its end.
    ObjectPin pin;
    std::vector<std::byte> out;
    RangeHandler h(pin, RangeHandler::Mode::kSuffix, 100, &out);
    Status st = feed(h, head(200, {{"content-length", "10000"}}), obj, 333);
    CHECK(st.code() == StatusCode::kNotSupported);
    CHECK(h.refused_whole_body());
  }
  {
    // No Content-Length (chunked): refused once the body passes the 100 bytes asked for.
    ObjectPin pin;
    std::vector<std::byte> out;
    RangeHandler h(pin, RangeHandler::Mode::kSuffix, 100, &out);
    CHECK(feed(h, head(200, {}), obj, 37).code() == StatusCode::kNotSupported);
    CHECK(h.refused_whole_body());
  }
  {
    // A chunked 200 shorter than the suffix asked for: all of it is the tail.
    ObjectPin pin;
    std::vector<std::byte> out;
    RangeHandler h(pin, RangeHandler::Mode::kSuffix, 100, &out);
    REQUIRE(feed(h, head(200, {}), std::span(obj).first(70), 37).ok());
    CHECK(out == std::vector<std::byte>(obj.begin(), obj.begin() + 70));
    CHECK(*h.total() == 70);
  }
  {
    ObjectPin pin;
    std::vector<std::byte> out;
    RangeHandler h(pin, RangeHandler::Mode::kHead, 100, &out);
    REQUIRE(feed(h, head(200, {}), std::span(obj).first(40)).ok());  // a 40-byte object
    CHECK(out.size() == 40);
    CHECK(*h.total() == 40);
  }
}
