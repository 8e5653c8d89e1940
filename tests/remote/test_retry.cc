// Backoff, Retry-After and which failures are retried.
#include <curl/curl.h>

#include <doctest/doctest.h>

#include "io/remote/retry.h"

using namespace jtree;
using namespace jtree::remote;

TEST_CASE("backoff: exponential with full jitter, capped, Retry-After honoured") {
  HttpOptions o;
  o.backoff_initial_seconds = 0.1;
  o.backoff_max_seconds = 2;
  CHECK(backoff_seconds(o, 1, 1.0, std::nullopt) == doctest::Approx(0.1));
  CHECK(backoff_seconds(o, 2, 1.0, std::nullopt) == doctest::Approx(0.2));
  CHECK(backoff_seconds(o, 4, 1.0, std::nullopt) == doctest::Approx(0.8));
  CHECK(backoff_seconds(o, 10, 1.0, std::nullopt) == doctest::Approx(2.0));    // capped
  CHECK(backoff_seconds(o, 1000, 1.0, std::nullopt) == doctest::Approx(2.0));  // no overflow
  CHECK(backoff_seconds(o, 3, 0.5, std::nullopt) == doctest::Approx(0.2));
  CHECK(backoff_seconds(o, 3, 0.0, std::nullopt) == 0.0);
  CHECK(backoff_seconds(o, 1, 0.0, 1.5) == doctest::Approx(1.5));  // the server asks for more
  CHECK(backoff_seconds(o, 1, 0.0, 60) == doctest::Approx(2.0));   // never above the cap
}

TEST_CASE("Retry-After: delta-seconds only") {
  CHECK(*parse_retry_after("0") == 0);
  CHECK(*parse_retry_after(" 120 ") == 120);
  CHECK(*parse_retry_after("99999999") == 86400);
  CHECK_FALSE(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT").has_value());
  CHECK_FALSE(parse_retry_after("-1").has_value());
}

TEST_CASE("what is retried") {
  for (long s : {408L, 429L, 500L, 502L, 503L, 504L, 599L}) CHECK(retryable_status(s));
  for (long s : {200L, 206L, 400L, 401L, 403L, 404L, 412L, 416L, 501L, 505L}) {
    CHECK_FALSE(retryable_status(s));
  }
  CHECK(retryable_curl_code(CURLE_COULDNT_CONNECT));
  CHECK(retryable_curl_code(CURLE_OPERATION_TIMEDOUT));
  CHECK(retryable_curl_code(CURLE_PARTIAL_FILE));
  CHECK(retryable_curl_code(CURLE_RECV_ERROR));
  CHECK(retryable_curl_code(CURLE_GOT_NOTHING));
  CHECK_FALSE(retryable_curl_code(CURLE_PEER_FAILED_VERIFICATION));
  CHECK_FALSE(retryable_curl_code(CURLE_URL_MALFORMAT));
  CHECK_FALSE(retryable_curl_code(CURLE_WRITE_ERROR));
}
