// SigV4 against AWS's published test vectors. Sources (values written here by hand; the suites
// cannot be downloaded in the test environment):
//  - "Signature Version 4 test suite" (aws-sig-v4-test-suite, AWS General Reference): requests
//    to example.amazonaws.com, service "service", us-east-1, 20150830T123600Z, key AKIDEXAMPLE /
//    wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY.
//  - Amazon S3 API Reference, "Signature Calculations for the Authorization Header:
//    Transferring Payload in a Single Chunk (AWS Signature Version 4)": examplebucket,
//    20130524T000000Z, key AKIAIOSFODNN7EXAMPLE / wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY.
// tests/remote/test_boto.py also compares the signer with botocore's on many S3 requests.
#include <doctest/doctest.h>

#include "io/remote/sigv4.h"

using namespace jtree::remote;

namespace {

SigV4Key suite_key() {
  return {"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1", "service",
          "20150830T123600Z"};
}

SigV4Request suite_request(std::string method, std::string uri,
                           std::vector<std::pair<std::string, std::string>> query = {}) {
  SigV4Request r;
  r.method = std::move(method);
  r.canonical_uri = std::move(uri);
  r.query = std::move(query);
  r.headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
  r.payload_hash = std::string(kEmptySha256);
  return r;
}

SigV4Key s3_key() {
  return {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "s3",
          "20130524T000000Z"};
}

}  // namespace

TEST_CASE("SigV4 test suite: get-vanilla") {
  const auto s = sign_v4(suite_request("GET", "/"), suite_key());
  CHECK(s.authorization ==
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  CHECK(s.canonical_request ==
        "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("SigV4 test suite: queries, methods, UTF-8 paths") {
  CHECK(sign_v4(suite_request("GET", "/", {{"Param2", "value2"}, {"Param1", "value1"}}),
                suite_key())
            .signature == "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
  CHECK(sign_v4(suite_request("POST", "/"), suite_key()).signature ==
        "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b");
  // get-utf8: the path "/\u1234", URI-encoded.
  CHECK(uri_encode("/\xE1\x88\xB4", true) == "/%E1%88%B4");
  CHECK(sign_v4(suite_request("GET", uri_encode("/\xE1\x88\xB4", true)), suite_key()).signature ==
        "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
}

TEST_CASE("SigV4 test suite: post-x-www-form-urlencoded (a signed header and body)") {
  SigV4Request r = suite_request("POST", "/");
  r.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded");
  r.payload_hash = sha256_hex(std::string_view("Param1=value1"));
  CHECK(r.payload_hash == "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e");
  const auto s = sign_v4(r, suite_key());
  CHECK(s.signed_headers == "content-type;host;x-amz-date");
  CHECK(sha256_hex(s.canonical_request) ==
        "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281");
  CHECK(s.signature == "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");
}

TEST_CASE("SigV4 S3 examples: GET object with Range") {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/test.txt";
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"Range", "bytes=0-9"},
               {"x-amz-content-sha256", std::string(kEmptySha256)},
               {"x-amz-date", "20130524T000000Z"}};
  r.payload_hash = std::string(kEmptySha256);
  const auto s = sign_v4(r, s3_key());
  CHECK(sha256_hex(s.canonical_request) ==
        "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  CHECK(s.authorization ==
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST_CASE("SigV4 S3 examples: PUT object (payload hash, Date, storage class, '$' in the key)") {
  const std::string hash = sha256_hex(std::string_view("Welcome to Amazon S3."));
  CHECK(hash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  SigV4Request r;
  r.method = "PUT";
  r.canonical_uri = uri_encode("/test$file.text", true);
  CHECK(r.canonical_uri == "/test%24file.text");
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
               {"x-amz-date", "20130524T000000Z"},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
               {"x-amz-content-sha256", hash}};
  r.payload_hash = hash;
  const auto s = sign_v4(r, s3_key());
  CHECK(s.signed_headers == "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class");
  CHECK(s.signature == "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST_CASE("SigV4 S3 examples: GET ?lifecycle and GET ?max-keys=2&prefix=J") {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/";
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"x-amz-content-sha256", std::string(kEmptySha256)},
               {"x-amz-date", "20130524T000000Z"}};
  r.payload_hash = std::string(kEmptySha256);
  r.query = {{"lifecycle", ""}};
  auto s = sign_v4(r, s3_key());
  CHECK(sha256_hex(s.canonical_request) ==
        "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca");
  CHECK(s.signature == "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
  r.query = {{"prefix", "J"}, {"max-keys", "2"}};  // out of order: the signer sorts
  CHECK(sign_v4(r, s3_key()).signature ==
        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST_CASE("SigV4 canonical pieces") {
  CHECK(uri_encode("a b/c~d_e.f-g+h*", true) == "a%20b/c~d_e.f-g%2Bh%2A");
  CHECK(uri_encode("a/b", false) == "a%2Fb");
  CHECK(canonical_query({{"b", ""}, {"a", "1"}, {"A", "x y"}, {"a", "0"}}) ==
        "A=x%20y&a=0&a=1&b=");
  CHECK(canonical_query({}).empty());
  // Values are trimmed and inner runs of spaces collapsed; repeated names joined by ','.
  SigV4Request r = suite_request("GET", "/");
  r.headers.emplace_back("My-Header1", "  a   b  ");
  r.headers.emplace_back("my-header1", "c");
  const auto s = sign_v4(r, suite_key());
  CHECK(s.canonical_request.find("\nmy-header1:a b,c\n") != std::string::npos);
  CHECK(s.signed_headers == "host;my-header1;x-amz-date");
  CHECK(amz_date(1440938160) == "20150830T123600Z");
  CHECK(hex(hmac_sha256("key", "The quick brown fox jumps over the lazy dog")) ==
        "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
}
