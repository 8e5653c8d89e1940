// Reading .jtree files from nginx over HTTP and HTTPS (HTTP/2): opens in one round trip,
// fetches only what is asked, reuses connections, verifies TLS, detects replaced files,
// copes with servers that ignore Range.
#include <sys/stat.h>
#include <utime.h>

#include <cstdlib>
#include <fstream>

#include "remote_test_util.h"

using namespace jtree;
using namespace jtree::remote_testing;

TEST_CASE("http: open in one round trip of two requests, read leaves bit-exact") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  const TestTree t = TestTree::make(6, 300000, 11);
  const std::string name = serve_tree(t, "http_basic.jtree");
  OpenOptions oo;
  oo.remote = fast_options();
  auto r = Reader::open(env("JTREE_TEST_HTTP") + "/" + name, oo);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  auto d = details(*(*r)->source());
  CHECK(d.round_trips == 1);
  CHECK(d.io.read_requests == 2);  // head and suffix tail, in parallel
  CHECK(d.io.retries == 0);
  CHECK((*r)->info().file_size == std::filesystem::file_size(env("JTREE_TEST_WWW") + "/" + name));
  CHECK_FALSE((*r)->source()->etag().empty());
  check_tree(**r, t);
  // Only the chunks were fetched after opening: about the leaves' bytes, no more.
  d = details(*(*r)->source());
  CHECK(d.io.bytes_read < 6 * 300000 + 2 * 320 * 1024);
}

TEST_CASE("http: a slice reads only the chunks it overlaps") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  // A 4 MiB leaf cut into 64 KiB chunks.
  TestTree t = TestTree::make(1, 4 << 20, 21);
  WriteOptions wo;
  wo.target_chunk_bytes = 64 << 10;
  const std::string name = serve_tree(t, "http_slice.jtree", wo);
  OpenOptions oo;
  oo.remote = fast_options();
  auto r = *Reader::open(env("JTREE_TEST_HTTP") + "/" + name, oo);
  const uint64_t after_open = r->io_stats().bytes_read;
  std::vector<std::byte> got(1000);
  REQUIRE(r->read_box(0, Box{{2'000'000}, {2'001'000}}, got).ok());
  CHECK(std::equal(got.begin(), got.end(), t.data[0].begin() + 2'000'000));
  const uint64_t fetched = r->io_stats().bytes_read - after_open;
  CHECK(fetched <= 2 * (64 << 10));  // one chunk (two when the slice straddles a boundary)
  CHECK(fetched >= 1000);
}

TEST_CASE("http: rows of raw chunks read without verification fetch only those rows") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  // A [256, 4096] uint8 leaf (1 MiB) in chunks of 64 rows (256 KiB).
  const std::vector<std::byte> data = pattern_bytes(256 * 4096, 33);
  TreeBuilder b;
  b.dict();
  b.key("w").array(DType::kUInt8, {256, 4096}, ArrayView{data.data()});
  b.end();
  WriteOptions wo;
  wo.codec = Codec::kRaw;
  wo.target_chunk_bytes = 256 << 10;
  const std::string name = std::to_string(run_id()) + "-http_rows.jtree";
  REQUIRE(save(*std::move(b).finish(), env("JTREE_TEST_WWW") + "/" + name, wo).ok());
  OpenOptions oo;
  oo.remote = fast_options();
  auto r = *Reader::open(env("JTREE_TEST_HTTP") + "/" + name, oo);
  const uint32_t leaf = *r->find_leaf("w");
  // Rows [60, 70) straddle the first two chunks; rows [130, 131) are inside the third.
  for (const auto& [begin, end] : {std::pair<uint64_t, uint64_t>{60, 70}, {130, 131}}) {
    const uint64_t wanted = (end - begin) * 4096;
    std::vector<std::byte> got(wanted);
    for (const bool verify : {false, true}) {
      ReadOptions ro;
      ro.verify_checksums = verify;
      const uint64_t before = r->io_stats().bytes_read;
      std::fill(got.begin(), got.end(), std::byte{0});
      REQUIRE(r->read_box(leaf, Box{{begin, 0}, {end, 4096}}, got, ro).ok());
      CHECK(std::equal(got.begin(), got.end(), data.begin() + begin * 4096));
      const uint64_t fetched = r->io_stats().bytes_read - before;
      MESSAGE("rows [" << begin << ", " << end << ") verify=" << verify << ": " << fetched
                       << " bytes fetched for " << wanted);
      const uint64_t chunks = begin / 64 == (end - 1) / 64 ? 1 : 2;
      if (verify) {
        // The checksum covers whole chunks (plus any padding between them).
        CHECK(fetched >= chunks * (256 << 10));
        CHECK(fetched < chunks * (256 << 10) + 4096);
      } else {
        CHECK(fetched == wanted);
      }
    }
  }
}

TEST_CASE("http: Source::read coalesces neighbouring ranges and splits large ones") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  const auto bytes = pattern_bytes(3 << 20, 5);
  const std::string path = env("JTREE_TEST_WWW") + "/ranges.bin";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  RemoteOptions o = fast_options();
  o.http.coalesce_gap = 1000;
  o.http.max_request_bytes = 1 << 20;
  auto src = *open_source(env("JTREE_TEST_HTTP") + "/ranges.bin", open_with(o));
  REQUIRE(src->size().ok());  // one request for the size
  std::vector<std::byte> a(100), b(100), c(100), big(2'500'000);
  ReadRange rs[] = {{5000, b}, {0, a}, {200'000, c}, {400'000, big}};  // unsorted on purpose
  const uint64_t before = src->stats().read_requests;
  REQUIRE(src->read(rs).ok());
  // 0 and 5000: two requests (a gap of 4900 > 1000); 200000: one; 2.5 MB: three pieces.
  const uint64_t requests = src->stats().read_requests - before;
  CHECK(requests == 2 + 1 + 3);
  CHECK(std::equal(a.begin(), a.end(), bytes.begin()));
  CHECK(std::equal(b.begin(), b.end(), bytes.begin() + 5000));
  CHECK(std::equal(c.begin(), c.end(), bytes.begin() + 200'000));
  CHECK(std::equal(big.begin(), big.end(), bytes.begin() + 400'000));
  // With a larger gap the first two share a request.
  o.http.coalesce_gap = 64 << 10;
  src = *open_source(env("JTREE_TEST_HTTP") + "/ranges.bin", open_with(o));
  REQUIRE(src->size().ok());
  const uint64_t before2 = src->stats().read_requests;
  ReadRange two[] = {{5000, b}, {0, a}};
  REQUIRE(src->read(two).ok());
  CHECK(src->stats().read_requests - before2 == 1);
  CHECK(std::equal(b.begin(), b.end(), bytes.begin() + 5000));
  // Past the end: an error naming the URL, without a request.
  std::vector<std::byte> tail(10);
  ReadRange past{bytes.size() - 5, tail};
  Status st = src->read(std::span(&past, 1));
  CHECK(st.is_io_error());
  CHECK(st.message().find("ranges.bin") != std::string::npos);
}

TEST_CASE("https: HTTP/2 with a verified certificate, connections reused") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTPS");
  const TestTree t = TestTree::make(8, 200000, 31);
  const std::string name = serve_tree(t, "https_basic.jtree");
  OpenOptions oo;
  oo.remote = fast_options();  // ca_file: the throwaway CA
  const std::string url = env("JTREE_TEST_HTTPS") + "/" + name;
  auto r = Reader::open(url, oo);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  for (int round = 0; round < 5; ++round) check_tree(**r, t);
  auto d = details(*(*r)->source());
  CHECK(d.http2_responses == d.io.read_requests);
  // Many requests, very few connections: HTTP/2 multiplexes, and they stay open.
  CHECK(d.io.read_requests >= 40);
  CHECK(d.connections <= 2);
  // Connections are shared across Sources too.
  auto r2 = *Reader::open(url, oo);
  check_tree(*r2, t);
  CHECK(details(*r2->source()).connections == 0);
}

TEST_CASE("https: an unknown CA is refused at once; verify_tls=false accepts it") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTPS");
  const TestTree t = TestTree::make(1, 1000, 41);
  const std::string name = serve_tree(t, "https_ca.jtree");
  OpenOptions oo;
  oo.remote = fast_options();
  oo.remote.http.ca_file = "/etc/ssl/certs/ca-certificates.crt";  // the system's CAs only
  const auto start = std::chrono::steady_clock::now();
  auto r = Reader::open(env("JTREE_TEST_HTTPS") + "/" + name, oo);
  REQUIRE_FALSE(r.ok());
  MESSAGE(r.status().to_string());
  CHECK(r.status().message().find(env("JTREE_TEST_HTTPS")) != std::string::npos);
  CHECK(r.status().message().find("certificate") != std::string::npos);
  CHECK(r.status().message().find("gave up") == std::string::npos);  // not retried
  CHECK(seconds_since(start) < 5);
  oo.remote.http.verify_tls = false;
  auto r2 = Reader::open(env("JTREE_TEST_HTTPS") + "/" + name, oo);
  REQUIRE(r2.ok());
  check_tree(**r2, t);
}

TEST_CASE("http: missing files are NotFound, naming the URL") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  OpenOptions oo;
  oo.remote = fast_options();
  const std::string url = env("JTREE_TEST_HTTP") + "/no/such/file.jtree";
  auto r = Reader::open(url, oo);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().is_not_found());
  CHECK(r.status().message().find(url) != std::string::npos);
  CHECK(r.status().message().find("404") != std::string::npos);
}

TEST_CASE("http: tiny and empty objects") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  const std::string www = env("JTREE_TEST_WWW");
  std::ofstream(www + "/empty.bin", std::ios::binary).flush();
  std::ofstream(www + "/tiny.bin", std::ios::binary).write("abc", 3);
  OpenOptions oo;
  oo.remote = fast_options();
  auto src = *open_source(env("JTREE_TEST_HTTP") + "/tiny.bin", oo);
  auto ht = src->read_head_tail(64 << 10, 256 << 10);
  REQUIRE_MESSAGE(ht.ok(), ht.status().to_string());
  CHECK(ht->size == 3);
  CHECK(ht->head.size() == 3);
  CHECK(ht->tail.size() == 3);
  CHECK(static_cast<char>(ht->tail[2]) == 'c');
  auto e = *open_source(env("JTREE_TEST_HTTP") + "/empty.bin", oo);
  auto eht = e->read_head_tail(64 << 10, 256 << 10);
  REQUIRE_MESSAGE(eht.ok(), eht.status().to_string());
  CHECK(eht->size == 0);
  CHECK(eht->head.empty());
  CHECK(eht->tail.empty());
  // Not jtree files: a clear Corruption, nothing worse.
  auto r = Reader::open(env("JTREE_TEST_HTTP") + "/empty.bin", oo);
  CHECK(r.status().is_corruption());
}

TEST_CASE("http: a server that ignores Range is refused, or downloaded whole when allowed") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  const TestTree t = TestTree::make(3, 100000, 51);
  const std::string name = serve_tree(t, "norange.jtree");
  OpenOptions oo;
  oo.remote = fast_options();
  // nginx's /norange/ location has max_ranges 0: every answer is 200 with the whole file.
  const std::string url = env("JTREE_TEST_HTTP") + "/norange/" + name;
  auto refused = open_source(url, oo);
  REQUIRE(refused.ok());
  auto st = Reader::open(*refused, oo);
  REQUIRE_FALSE(st.ok());
  CHECK(st.status().code() == StatusCode::kNotSupported);
  CHECK(st.status().message().find(url) != std::string::npos);
  CHECK(st.status().message().find("server ignores HTTP Range requests") != std::string::npos);
  CHECK(details(**refused).io.bytes_read == 0);  // stopped at the headers
  oo.remote.http.allow_full_download = true;
  auto r = Reader::open(url, oo);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  check_tree(**r, t);
  const auto d = details(*(*r)->source());
  CHECK(d.range_ignored > 0);
  CHECK(d.full_downloads == 1);
  CHECK(d.io.bytes_read == (*r)->info().file_size);  // once, whole
}

TEST_CASE("http: a file replaced while a Reader uses it is detected, not mixed") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  const TestTree t1 = TestTree::make(2, 100000, 61);
  const TestTree t2 = TestTree::make(2, 100000, 62);
  const std::string name = serve_tree(t1, "replaced.jtree");
  OpenOptions oo;
  oo.remote = fast_options();
  auto r = *Reader::open(env("JTREE_TEST_HTTP") + "/" + name, oo);
  const std::string etag = r->source()->etag();
  CHECK_FALSE(etag.empty());
  // The new version, with another modification time (nginx's ETag is mtime-size).
  const std::string path = env("JTREE_TEST_WWW") + "/" + name;
  REQUIRE(save(t2.tree(), path).ok());
  struct utimbuf times{1000000000, 1000000000};
  REQUIRE(::utime(path.c_str(), &times) == 0);
  std::vector<std::byte> got(100000);
  Status st = r->read(*r->find_leaf("w0"), got);
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == StatusCode::kAborted);
  CHECK(st.message().find("changed while being read") != std::string::npos);
  CHECK(st.message().find(name) != std::string::npos);
  // A new Reader sees the new version.
  auto r2 = *Reader::open(env("JTREE_TEST_HTTP") + "/" + name, oo);
  check_tree(*r2, t2);
}

TEST_CASE("http: http_proxy is honoured") {
  JTREE_NEED_SERVER("JTREE_TEST_PROXY");
  const TestTree t = TestTree::make(1, 5000, 71);
  const std::string name = serve_tree(t, "via_proxy.jtree");
  auto count = [] {
    // The proxy's own counter of forwarded requests.
    // (It answers every GET with 200 and the whole document: it ignores Range.)
    std::string stats_url = env("JTREE_TEST_PROXY") + "/_stats";
    RemoteOptions o = fast_options();
    o.http.allow_full_download = true;
    auto src = *open_source(stats_url, open_with(o));
    std::vector<std::byte> buf(*src->size());
    ReadRange rr{0, buf};
    REQUIRE(src->read(std::span(&rr, 1)).ok());
    std::string json(reinterpret_cast<char*>(buf.data()), buf.size());
    const size_t at = json.find("\"forward_proxied\": ");
    REQUIRE(at != std::string::npos);
    return std::stoi(json.substr(at + 19));
  };
  const int before = count();
  ::setenv("http_proxy", env("JTREE_TEST_PROXY").c_str(), 1);
  ::setenv("NO_PROXY", "", 1);
  OpenOptions oo;
  oo.remote = fast_options();
  auto r = Reader::open(env("JTREE_TEST_HTTP") + "/" + name, oo);
  Status st = r.ok() ? Status::success() : r.status();
  if (r.ok()) check_tree(**r, t);
  ::unsetenv("http_proxy");
  ::unsetenv("NO_PROXY");
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  CHECK(count() - before >= 3);  // open (2) and the leaf (1) went through the proxy
}

TEST_CASE("http: writing and appending over http are refused clearly") {
  JTREE_NEED_SERVER("JTREE_TEST_HTTP");
  const TestTree t = TestTree::make(1, 1000, 81);
  auto st = save(t.tree(), env("JTREE_TEST_HTTP") + "/nope.jtree");
  REQUIRE_FALSE(st.ok());
  CHECK(st.status().is_not_supported());
  const std::string name = serve_tree(t, "append_http.jtree");
  WriteOptions wo;
  wo.remote = fast_options();
  auto ap = append(env("JTREE_TEST_HTTP") + "/" + name, t.tree(), wo);
  REQUIRE_FALSE(ap.ok());
  CHECK(ap.status().is_not_supported());
}
