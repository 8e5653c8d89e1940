// The backend table (lib/src/io/backend.h): which backend a path or URL reaches, and what the
// entry points answer for operations a backend does not have (the same messages as before the
// table existed). No server needed: nothing here makes a request.
#include <doctest/doctest.h>

#include "io/backend.h"
#include "jtree/jtree.h"

using namespace jtree;

namespace {

std::string backend_of(std::string_view path_or_url) {
  auto b = io::find_backend(path_or_url);
  REQUIRE_MESSAGE(b.ok(), b.status().to_string());
  return std::string((*b)->name);
}

}  // namespace

TEST_CASE("backend table: schemes pick backends, case-insensitively; paths are files") {
  CHECK(backend_of("ckpt.jtree") == "file");
  CHECK(backend_of("/abs/ckpt.jtree") == "file");
  CHECK(backend_of("runs/a://b") == "file");  // not a scheme before "://"
  CHECK(backend_of("file:///abs/ckpt.jtree") == "file");
  CHECK(backend_of("FILE:///abs/ckpt.jtree") == "file");
  CHECK(backend_of("http://host/x") == "http(s)");
  CHECK(backend_of("HTTPS://host/x") == "http(s)");
  CHECK(backend_of("s3://bucket/key") == "s3");
  CHECK(backend_of("S3://bucket/key") == "s3");
  auto ftp = io::find_backend("ftp://host/x");
  // NotSupported (jtree/c.h: "a URL scheme this build lacks"), naming what the build reads.
  CHECK(ftp.status().is_not_supported());
  CHECK(ftp.status().message() ==
        "ftp://host/x: unsupported URL scheme \"ftp\" (this build reads local paths, file://, "
        "http(s)://, s3://)");
}

TEST_CASE("backend table: operations a backend lacks are refused, naming the URL") {
  const std::string http = "http://127.0.0.1:9/x.jtree";
  auto sink = create_sink(http);
  CHECK(sink.status().is_not_supported());
  CHECK(sink.status().message() ==
        http + ": writing over http(s) is not supported; write to s3:// or a local path");
  auto append = open_append_sink("https://127.0.0.1:9/x.jtree", 10);
  CHECK(append.status().is_not_supported());
  CHECK(append.status().message() ==
        "https://127.0.0.1:9/x.jtree: appending needs a local file or an s3:// object");
  Status rm = remove_object(http);
  CHECK(rm.is_not_supported());
  CHECK(rm.message() == http + ": removing http(s) objects is not supported");
  rm = remove_object("gs://bucket/x");
  CHECK(rm.is_not_supported());
  CHECK(rm.message() == "gs://bucket/x: removing objects is not supported for this URL scheme");
  auto stale = remove_stale_temp_files(http);
  CHECK(stale.status().is_not_supported());
  CHECK(stale.status().message() ==
        http + ": stale temporary files are a local-file or s3:// matter");
  for (const char* url : {"/tmp/x.jtree", "file:///tmp/x.jtree", "gs://bucket/x"}) {
    CAPTURE(url);
    auto st = stat_object(url);
    CHECK(st.status().is_invalid_argument());
    CHECK(st.status().message() == std::string(url) + ": stat_object takes http(s):// and s3:// URLs");
  }
  auto gs = open_source("gs://bucket/x");
  CHECK(gs.status().is_not_supported());
  CHECK(create_sink("gs://bucket/x").status().is_not_supported());
  CHECK(open_append_sink("gs://bucket/x", 1).status().is_not_supported());
}

TEST_CASE("backend table: a local path opens as a file (its errors name the path)") {
  auto s = open_source("/nonexistent-dir-jtree/x.jtree");
  CHECK(s.status().is_not_found());
  CHECK(s.status().message().rfind("/nonexistent-dir-jtree/x.jtree", 0) == 0);
}
