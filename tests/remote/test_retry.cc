// Backoff, Retry-After, which failures are retried, and the server's words in messages.
#include <curl/curl.h>

#include <cerrno>
#include <string>

#include <doctest/doctest.h>

#include "io/remote/remote_call.h"
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

TEST_CASE("failures that repeat however often they are retried") {
  CHECK(is_loopback_host("localhost"));
  CHECK(is_loopback_host("LOCALHOST"));
  CHECK(is_loopback_host("127.0.0.1"));
  CHECK(is_loopback_host("127.12.0.9"));
  CHECK(is_loopback_host("[::1]"));
  CHECK(is_loopback_host("::ffff:127.0.0.1"));
  CHECK_FALSE(is_loopback_host("128.0.0.1"));
  CHECK_FALSE(is_loopback_host("10.0.0.1"));
  CHECK_FALSE(is_loopback_host("[::2]"));
  CHECK_FALSE(is_loopback_host("example.com"));
  CHECK_FALSE(is_loopback_host("localhost.example.com"));
  CHECK_FALSE(is_loopback_host(""));

  // A refused connection: for good on this machine, transient elsewhere (a server restarting).
  const char* refused = "Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect";
  CHECK(permanent_failure(CURLE_COULDNT_CONNECT, ECONNREFUSED, "http://127.0.0.1:9/x", refused)
            .find("refused") != std::string::npos);
  CHECK_FALSE(permanent_failure(CURLE_COULDNT_CONNECT, ECONNREFUSED, "http://[::1]:9/x", refused)
                  .empty());
  CHECK(permanent_failure(CURLE_COULDNT_CONNECT, ECONNREFUSED, "http://10.1.2.3:9/x", refused)
            .empty());
  CHECK(permanent_failure(CURLE_COULDNT_CONNECT, ETIMEDOUT, "http://127.0.0.1:9/x", refused)
            .empty());
  CHECK(permanent_failure(CURLE_COULDNT_CONNECT, 0, "http://localhost:9/x", refused).empty());
  // TLS: the versions or ciphers do not meet (for good); a handshake cut short (transient).
  for (const char* e : {"OpenSSL/3.0.19: error:0A00010B:SSL routines::wrong version number",
                        "error:0A00042E:SSL routines::tlsv1 alert protocol version",
                        "error:0A000102:SSL routines::unsupported protocol",
                        "error:0A000410:SSL routines::sslv3 alert handshake failure"}) {
    CAPTURE(e);
    CHECK(permanent_failure(CURLE_SSL_CONNECT_ERROR, 0, "https://example.com/x", e)
              .find("TLS") != std::string::npos);
  }
  CHECK(permanent_failure(CURLE_SSL_CONNECT_ERROR, ECONNRESET, "https://example.com/x",
                          "OpenSSL SSL_connect: Connection reset by peer")
            .empty());
  CHECK(permanent_failure(CURLE_OPERATION_TIMEDOUT, 0, "http://127.0.0.1:9/x", "timed out")
            .empty());
}

TEST_CASE("error bodies in messages: one short line") {
  CHECK(error_excerpt("") == "");
  CHECK(error_excerpt(" \r\n ") == "");
  CHECK(error_excerpt("Not Found\n") == "Not Found");
  CHECK(error_excerpt("  bucket is gone\nsecond line\n") == "bucket is gone");
  CHECK(error_excerpt("a\tb\x01 c") == "a b c");
  // HTML: the title, as servers put their summary there; else the text between the tags.
  CHECK(error_excerpt("<html><head><title>404 Not Found</title></head><body><center><h1>404 "
                      "Not Found</h1></center><hr><center>nginx</center></body></html>") ==
        "404 Not Found");
  CHECK(error_excerpt("\n<!DOCTYPE html>\n<HTML><TITLE>\n  Gone \n</TITLE></HTML>") == "Gone");
  CHECK(error_excerpt("<html><body><h1>Oops</h1><p>try later</p></body></html>") ==
        "Oops try later");
  CHECK(error_excerpt("<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code></Error>") ==
        "NoSuchKey");
  // Long: cut to 100 characters, saying so.
  const std::string cut = error_excerpt(std::string(5000, 'x'));
  CHECK(cut.size() == 100);
  CHECK(cut == std::string(97, 'x') + "...");
  CHECK(error_excerpt(std::string(100, 'y')) == std::string(100, 'y'));
}
