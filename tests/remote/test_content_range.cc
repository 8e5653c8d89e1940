// Content-Range parsing: the forms servers send, and what they must not.
#include <doctest/doctest.h>

#include "io/remote/content_range.h"

using namespace jtree::remote;

TEST_CASE("Content-Range: the two valid forms") {
  auto a = parse_content_range("bytes 0-99/1234");
  REQUIRE(a.ok());
  CHECK(a->has_range);
  CHECK(a->first == 0);
  CHECK(a->last == 99);
  CHECK(a->length() == 100);
  CHECK(*a->total == 1234);

  auto b = parse_content_range("  bytes 5-5/*\r");
  REQUIRE_FALSE(b.ok());  // '\r' is not whitespace the parser trims: the client strips it
  b = parse_content_range("  bytes 5-5/* ");
  REQUIRE(b.ok());
  CHECK(b->length() == 1);
  CHECK_FALSE(b->total.has_value());

  auto c = parse_content_range("bytes */0");
  REQUIRE(c.ok());
  CHECK_FALSE(c->has_range);
  CHECK(*c->total == 0);

  auto d = parse_content_range("Bytes 1-2/3");  // the unit is case-insensitive
  REQUIRE(d.ok());
  CHECK(d->last == 2);

  auto big = parse_content_range("bytes 0-9999999999999999998/9999999999999999999");
  REQUIRE(big.ok());
  CHECK(*big->total == 9999999999999999999ull);
}

TEST_CASE("Content-Range: malformed values are refused") {
  for (const char* bad : {"", "bytes", "bytes ", "bytes */*", "bits 0-1/2", "bytes 0-1", "bytes -1/2",
                          "bytes 1-/2", "bytes 2-1/5", "bytes 0-5/5", "bytes 0-1/x", "bytes a-b/3",
                          "bytes 0-1/99999999999999999999", "bytes 0--1/3", "bytes 0-1/2/3",
                          "bytes 0 - 1/2", "bytes +0-1/2", "bytes 0-1/-2"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_content_range(bad).ok());
  }
}

TEST_CASE("parse_decimal bounds its input") {
  CHECK(*parse_decimal("0") == 0);
  CHECK_FALSE(parse_decimal("18446744073709551615").has_value());  // 20 digits: refused
  CHECK(parse_decimal("9999999999999999999").has_value());
  CHECK_FALSE(parse_decimal("").has_value());
  CHECK_FALSE(parse_decimal("1 ").has_value());
  CHECK_FALSE(parse_decimal("-1").has_value());
}
