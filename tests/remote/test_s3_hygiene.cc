// S3 against Ceph RGW: what a writer must not harm or leave behind (issue 19). A save or a
// multi-process commit never replaces an object that is not a jtree file (unless
// overwrite_foreign); a save or commit aborts the incomplete multipart uploads that killed
// writers of its target (and of its segments) left; `jtree clean s3://...` does it by hand.
#include <algorithm>
#include <thread>

#include "io/remote/s3_stale_uploads.h"
#include "io/remote/sigv4.h"
#include "remote_test_util.h"

using namespace jtree;
using namespace jtree::remote_testing;

namespace {

const std::string& hygiene_bucket() {
  static const std::string b = [] {
    std::string name = unique_bucket("jtree-hygiene");
    make_bucket(name);
    return name;
  }();
  return b;
}

std::string url_of(const std::string& key) { return "s3://" + hygiene_bucket() + "/" + key; }

remote::S3Client client() {
  auto config = remote::resolve_s3_config(s3_options(), remote::Environment::process());
  REQUIRE(config.ok());
  return remote::S3Client(*config, s3_options());
}

void put_object(const std::string& key, std::string_view text) {
  auto c = client();
  Status st = c.put_object({hygiene_bucket(), key}, std::as_bytes(std::span(text)));
  REQUIRE_MESSAGE(st.ok(), st.to_string());
}

std::string get_object(const std::string& key) {
  auto src = open_source(url_of(key), open_with(s3_options()));
  REQUIRE(src.ok());
  auto size = (*src)->size();
  REQUIRE(size.ok());
  std::string out(*size, '\0');
  ReadRange r{0, std::as_writable_bytes(std::span(out))};
  REQUIRE((*src)->read(std::span(&r, 1)).ok());
  return out;
}

// A killed writer: an upload started, a part stored, never completed nor aborted.
std::string leave_upload(const std::string& key) {
  auto c = client();
  auto id = c.create_multipart_upload({hygiene_bucket(), key});
  REQUIRE_MESSAGE(id.ok(), id.status().to_string());
  const auto part = pattern_bytes(1000, 5);
  auto etag = c.upload_part({hygiene_bucket(), key}, *id, 1, part, remote::sha256_hex(part));
  REQUIRE_MESSAGE(etag.ok(), etag.status().to_string());
  return *id;
}

// The keys of the incomplete uploads under `prefix`.
std::vector<std::string> pending(const std::string& prefix) {
  auto c = client();
  auto page = c.list_uploads_page(hygiene_bucket(), prefix, "", "");
  REQUIRE_MESSAGE(page.ok(), page.status().to_string());
  std::vector<std::string> keys;
  for (const auto& u : page->uploads) keys.push_back(u.key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// The test server in the environment, as jobs are usually configured (jtree clean reads only
// the environment); restored afterwards.
class ServerInEnvironment {
 public:
  ServerInEnvironment() {
    set("AWS_ENDPOINT_URL_S3", env("JTREE_TEST_S3_ENDPOINT"));
    set("AWS_ACCESS_KEY_ID", env("JTREE_TEST_S3_KEY"));
    set("AWS_SECRET_ACCESS_KEY", env("JTREE_TEST_S3_SECRET"));
    set("AWS_REGION", "us-east-1");
  }
  ~ServerInEnvironment() {
    for (auto& [name, old] : saved_) {
      if (old) ::setenv(name.c_str(), old->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  void set(const char* name, const std::string& value) {
    const char* v = std::getenv(name);
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
    ::setenv(name, value.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

WriteOptions s3_write() {
  WriteOptions wo;
  wo.remote = s3_options();
  return wo;
}

// Process k's segment of a [2, 1000] uint8 array split by rows (two processes).
Status save_row_segment(const std::string& target, uint32_t k, const std::vector<std::byte>& full) {
  auto in = std::make_shared<LeafInput>();
  in->shard_shape = {1, 1000};
  in->shards.emplace();
  in->shards->push_back({Box{{k, 0}, {k + 1, 1000}}, ArrayView{full.data() + k * 1000}});
  Leaf l;
  l.kind = LeafKind::kArray;
  l.dtype = DType::kUInt8;
  l.shape = {2, 1000};
  l.storage = Storage::kChunked;
  l.input = std::move(in);
  TreeBuilder b;
  b.dict();
  b.key("w").leaf(l);
  b.end();
  SegmentOptions seg;
  seg.process_count = 2;
  seg.process_index = k;
  seg.save_id = 77;
  return save_segment(*std::move(b).finish(), target, seg, s3_write()).status();
}

}  // namespace

TEST_CASE("s3: a save never replaces an object that is not a jtree file") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const TestTree t = TestTree::make(2, 1000, 11);
  put_object("foreign/a.txt", "someone's notes, not a checkpoint");
  auto st = save(t.tree(), url_of("foreign/a.txt"), s3_write());
  REQUIRE_FALSE(st.ok());
  CHECK(st.status().code() == StatusCode::kAlreadyExists);
  CHECK(st.status().message().find("is not a jtree file") != std::string::npos);
  CHECK(st.status().message().find("foreign/a.txt") != std::string::npos);
  CHECK(get_object("foreign/a.txt") == "someone's notes, not a checkpoint");
  // Shorter than the magic: foreign too. An empty object and a missing one are fine.
  put_object("foreign/short", "abc");
  CHECK(save(t.tree(), url_of("foreign/short"), s3_write()).status().code() ==
        StatusCode::kAlreadyExists);
  put_object("foreign/empty", "");
  CHECK(save(t.tree(), url_of("foreign/empty"), s3_write()).ok());
  CHECK(save(t.tree(), url_of("foreign/new"), s3_write()).ok());
  // A jtree file is replaced as before; overwrite_foreign replaces anything.
  CHECK(save(t.tree(), url_of("foreign/new"), s3_write()).ok());
  WriteOptions force = s3_write();
  force.overwrite_foreign = true;
  REQUIRE(save(t.tree(), url_of("foreign/a.txt"), force).ok());
  auto r = Reader::open(url_of("foreign/a.txt"), open_with(s3_options()));
  REQUIRE(r.ok());
  check_tree(**r, t);
}

TEST_CASE("s3: a multi-process commit never replaces an object that is not a jtree file") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  ServerInEnvironment configured;  // (the commit removes the segments with its defaults)
  const auto full = pattern_bytes(2000, 3);
  const std::string target = url_of("foreign/ckpt.jtree");
  put_object("foreign/ckpt.jtree", "a foreign object");
  for (uint32_t k = 0; k < 2; ++k) {
    Status seg = save_row_segment(target, k, full);
    REQUIRE_MESSAGE(seg.ok(), seg.to_string());
  }
  CommitOptions co;
  co.write = s3_write();
  co.keep_segments = false;
  auto st = commit_segments(target, 2, co);
  REQUIRE_FALSE(st.ok());
  CHECK(st.status().code() == StatusCode::kAlreadyExists);
  CHECK(get_object("foreign/ckpt.jtree") == "a foreign object");
  // The segments are still there: forced, the same commit succeeds.
  co.write.overwrite_foreign = true;
  auto forced = commit_segments(target, 2, co);
  REQUIRE_MESSAGE(forced.ok(), forced.status().to_string());
  auto r = Reader::open(target, open_with(s3_options()));
  REQUIRE(r.ok());
  std::vector<std::byte> got(full.size());
  REQUIRE((*r)->read(*(*r)->find_leaf("w"), got).ok());
  CHECK(got == full);
}

TEST_CASE("s3: a save aborts the incomplete uploads killed writers of its target left") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const std::string key = "stale/a.jtree";
  leave_upload(key);
  leave_upload(key + ".seg-00001-of-00002");
  leave_upload(key + "-other");  // another target that merely shares the prefix: kept
  REQUIRE(pending(key).size() == 3);
  // S3 dates uploads in milliseconds: this save starts after them.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const TestTree t = TestTree::make(2, 1000, 12);
  auto st = save(t.tree(), url_of(key), s3_write());
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  CHECK(pending(key) == std::vector<std::string>{key + "-other"});
  // `jtree clean` by hand: every upload of the target and its segments, whatever its age.
  ServerInEnvironment configured;
  leave_upload(key);
  leave_upload(key + ".seg-00000-of-00002");
  auto cleaned = remove_stale_temp_files(url_of(key));
  REQUIRE_MESSAGE(cleaned.ok(), cleaned.status().to_string());
  CHECK(*cleaned == 2);
  CHECK(pending(key) == std::vector<std::string>{key + "-other"});
  auto other = remove_stale_temp_files(url_of(key + "-other"));
  REQUIRE(other.ok());
  CHECK(*other == 1);
  CHECK(pending(key).empty());
}

TEST_CASE("s3: a multi-process save and commit abort what killed writers of the target left") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  ServerInEnvironment configured;  // (the commit removes the segments with its defaults)
  const std::string key = "stale/multi.jtree";
  const std::string target = url_of(key);
  leave_upload(key);
  leave_upload(key + ".seg-00000-of-00002");
  leave_upload(key + ".seg-00001-of-00003");  // a killed attempt with another process count
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto full = pattern_bytes(2000, 4);
  for (uint32_t k = 0; k < 2; ++k) {
    Status seg = save_row_segment(target, k, full);
    REQUIRE_MESSAGE(seg.ok(), seg.to_string());
  }
  CommitOptions co;
  co.write = s3_write();
  auto st = commit_segments(target, 2, co);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  CHECK(pending(key).empty());
}

TEST_CASE("s3: which keys are a target's, and S3 timestamps") {
  using remote::is_target_or_segment;
  CHECK(is_target_or_segment("a/b.jtree", "a/b.jtree"));
  CHECK(is_target_or_segment("a/b.jtree.seg-00001-of-00004", "a/b.jtree"));
  CHECK(is_target_or_segment("a/b.jtree.seg-100001-of-100004", "a/b.jtree"));
  CHECK_FALSE(is_target_or_segment("a/b.jtree2", "a/b.jtree"));
  CHECK_FALSE(is_target_or_segment("a/b.jtree.seg-1x-of-4", "a/b.jtree"));
  CHECK_FALSE(is_target_or_segment("a/b.jtree.seg-00001-of-", "a/b.jtree"));
  CHECK_FALSE(is_target_or_segment("a/b.jtree.tmp", "a/b.jtree"));
  CHECK(remote::parse_s3_time_ms("1970-01-01T00:00:01.250Z") == 1250);
  CHECK(remote::parse_s3_time_ms("2026-11-25T15:40:00Z") == int64_t{1795621200} * 1000);
  CHECK_FALSE(remote::parse_s3_time_ms("2026-11-25 15:40:00Z"));
  CHECK_FALSE(remote::parse_s3_time_ms("2026-11-25T15:40:00.1x2Z"));
  CHECK_FALSE(remote::parse_s3_time_ms("yesterday"));
}
