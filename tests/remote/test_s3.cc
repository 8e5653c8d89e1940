// S3 against Ceph RGW (which verifies SigV4): saves (one PUT; parallel multipart), loads,
// aborts that leave nothing, errors without retry storms, listing, deletion, server-side
// copies, appends as new versions, addressing styles and the credential chain.
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "remote_test_util.h"

using namespace jtree;
using namespace jtree::remote_testing;

namespace {

std::string s3_url(const std::string& bucket, const std::string& key) {
  return "s3://" + bucket + "/" + key;
}

const std::string& bucket() {
  static const std::string b = [] {
    std::string name = unique_bucket("jtree-test");
    make_bucket(name);
    return name;
  }();
  return b;
}

// Raw bytes through a Sink.
IoStats put_bytes(const std::string& url, std::span<const std::byte> bytes, size_t piece,
                  const RemoteOptions& o = s3_options()) {
  SinkOptions so;
  so.remote = o;
  auto sink = create_sink(url, so);
  REQUIRE_MESSAGE(sink.ok(), sink.status().to_string());
  for (size_t i = 0; i < bytes.size(); i += piece) {
    REQUIRE((*sink)->append(bytes.subspan(i, std::min(piece, bytes.size() - i))).ok());
  }
  Status st = (*sink)->commit();
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  return (*sink)->stats();
}

std::vector<std::byte> get_bytes(const std::string& url, const RemoteOptions& o = s3_options()) {
  auto src = open_source(url, open_with(o));
  REQUIRE(src.ok());
  auto size = (*src)->size();
  REQUIRE_MESSAGE(size.ok(), size.status().to_string());
  std::vector<std::byte> out(*size);
  ReadRange r{0, out};
  Status st = (*src)->read(std::span(&r, 1));
  REQUIRE_MESSAGE(st.ok(), st.to_string());
  return out;
}

// Sets environment variables for a scope, restoring them afterwards.
class ScopedEnv {
 public:
  void set(const char* name, const std::string& value) {
    remember(name);
    ::setenv(name, value.c_str(), 1);
  }
  void unset(const char* name) {
    remember(name);
    ::unsetenv(name);
  }
  ~ScopedEnv() {
    for (auto& [name, old] : saved_) {
      if (old) ::setenv(name.c_str(), old->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  void remember(const char* name) {
    const char* v = std::getenv(name);
    saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_CASE("s3: a small save is one PUT; the load is bit-exact") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const TestTree t = TestTree::make(3, 100000, 201);
  const std::string url = s3_url(bucket(), "small/a.jtree");
  WriteOptions wo;
  wo.remote = s3_options();
  auto st = save(t.tree(), url, wo);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  OpenOptions oo;
  oo.remote = s3_options();
  auto r = Reader::open(url, oo);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  check_tree(**r, t);
  auto d = details(*(*r)->source());
  CHECK(d.round_trips <= 5);
  auto info = stat_object(url, s3_options());
  REQUIRE(info.ok());
  CHECK(info->size == st->file_size);
  CHECK_FALSE(info->etag.empty());
  // Written with one request.
  const auto bytes = pattern_bytes(1000, 1);
  CHECK(put_bytes(s3_url(bucket(), "small/raw"), bytes, 100).write_requests == 1);
  CHECK(get_bytes(s3_url(bucket(), "small/raw")) == bytes);
}

TEST_CASE("s3: a large save is a multipart upload with parallel parts") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const TestTree t = TestTree::make(5, 4'500'000, 211);  // ~22.5 MB: 5 parts of 5 MiB
  const std::string url = s3_url(bucket(), "large/model.jtree");
  WriteOptions wo;
  wo.remote = s3_options();
  wo.remote.s3.upload_concurrency = 3;
  SinkOptions so;
  so.remote = wo.remote;
  auto sink = create_sink(url, so);
  REQUIRE(sink.ok());
  auto st = save(t.tree(), **sink, wo);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  const IoStats ws = (*sink)->stats();
  CHECK(ws.write_requests == 1 + 5 + 1);  // create, 5 parts, complete
  CHECK(ws.bytes_written >= st->file_size);
  OpenOptions oo;
  oo.remote = s3_options();
  auto r = Reader::open(url, oo);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  check_tree(**r, t);
  auto v = (*r)->verify();
  REQUIRE(v.ok());
  CHECK(v->ok());
  // Raw sizes around the part boundary.
  for (size_t n : {size_t{0}, size_t{1}, (size_t{5} << 20) - 1, size_t{5} << 20,
                   (size_t{5} << 20) + 1, (size_t{11} << 20) + 3}) {
    CAPTURE(n);
    const auto bytes = pattern_bytes(n, n);
    const std::string key = s3_url(bucket(), "sizes/" + std::to_string(n));
    put_bytes(key, bytes, 777'777);
    CHECK(get_bytes(key) == bytes);
  }
}

TEST_CASE("s3: a failed save leaves no object, and no previous one is harmed") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const std::string url = s3_url(bucket(), "failed/x.jtree");
  const TestTree t = TestTree::make(4, 4'000'000, 221);
  WriteOptions wo;
  wo.remote = s3_options();
  wo.progress = [](uint64_t done, uint64_t) { return done < 9'000'000; };  // cancel midway
  auto st = save(t.tree(), url, wo);
  REQUIRE_FALSE(st.ok());
  CHECK(st.status().code() == StatusCode::kAborted);
  CHECK(stat_object(url, s3_options()).status().is_not_found());
  // Over an existing object: the old one stays.
  const TestTree old = TestTree::make(1, 1000, 222);
  wo.progress = nullptr;
  REQUIRE(save(old.tree(), url, wo).ok());
  wo.progress = [](uint64_t done, uint64_t) { return done < 9'000'000; };
  REQUIRE_FALSE(save(t.tree(), url, wo).ok());
  OpenOptions oo;
  oo.remote = s3_options();
  check_tree(**Reader::open(url, oo), old);
  // A sink dropped without commit aborts.
  {
    SinkOptions so;
    so.remote = s3_options();
    auto sink = create_sink(s3_url(bucket(), "failed/dropped"), so).value();
    const auto bytes = pattern_bytes(12 << 20, 3);
    REQUIRE(sink->append(bytes).ok());
  }
  CHECK(stat_object(s3_url(bucket(), "failed/dropped"), s3_options()).status().is_not_found());
  // overwrite = false refuses an existing object.
  SinkOptions keep;
  keep.remote = s3_options();
  keep.overwrite = false;
  auto refused = create_sink(url, keep);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kAlreadyExists);
}

TEST_CASE("s3: wrong credentials fail at once with a clear error naming bucket and key") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const std::string key = "creds/obj.jtree";
  const TestTree t = TestTree::make(1, 1000, 231);
  WriteOptions good;
  good.remote = s3_options();
  REQUIRE(save(t.tree(), s3_url(bucket(), key), good).ok());
  RemoteOptions bad = s3_options();
  bad.s3.secret_access_key = "WRONG";
  bad.http.max_retries = 10;
  auto src = *open_source(s3_url(bucket(), key), open_with(bad));
  const auto start = std::chrono::steady_clock::now();
  auto ht = src->read_head_tail(64 << 10, 256 << 10);
  REQUIRE_FALSE(ht.ok());
  MESSAGE(ht.status().to_string());
  CHECK(seconds_since(start) < 2);
  CHECK(ht.status().code() == StatusCode::kPermissionDenied);
  const std::string& m = ht.status().message();
  CHECK(m.find("SignatureDoesNotMatch") != std::string::npos);
  CHECK(m.find("bucket \"" + bucket() + "\"") != std::string::npos);
  CHECK(m.find("key \"" + key + "\"") != std::string::npos);
  CHECK(m.find("credentials from options") != std::string::npos);
  CHECK(src->stats().read_requests == 2);  // head and tail, once each
  CHECK(src->stats().retries == 0);
  // Writes: one request.
  WriteOptions wo;
  wo.remote = bad;
  auto st = save(t.tree(), s3_url(bucket(), "creds/new.jtree"), wo);
  REQUIRE_FALSE(st.ok());
  CHECK(st.status().code() == StatusCode::kPermissionDenied);
  // An unknown access key.
  bad.s3.access_key_id = "NOSUCHKEY";
  auto r = Reader::open(s3_url(bucket(), key), open_with(bad));
  CHECK(r.status().code() == StatusCode::kPermissionDenied);
  CHECK(r.status().message().find("InvalidAccessKeyId") != std::string::npos);
}

TEST_CASE("s3: missing keys and buckets are NotFound") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  OpenOptions oo;
  oo.remote = s3_options();
  auto r = Reader::open(s3_url(bucket(), "no/such.jtree"), oo);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().is_not_found());
  CHECK(r.status().message().find("NoSuchKey") != std::string::npos);
  CHECK(r.status().message().find("s3://" + bucket() + "/no/such.jtree") != std::string::npos);
  auto r2 = Reader::open("s3://no-such-bucket-jtree/x", oo);
  CHECK(r2.status().is_not_found());
  CHECK(stat_object(s3_url(bucket(), "no/such"), s3_options()).status().is_not_found());
}

TEST_CASE("s3: ListObjectsV2 pages, DeleteObject, HEAD") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const auto bytes = pattern_bytes(10, 7);
  for (int i = 0; i < 7; ++i) put_bytes(s3_url(bucket(), "list/k" + std::to_string(i)), bytes, 10);
  put_bytes(s3_url(bucket(), "list/sub/deeper"), bytes, 10);
  put_bytes(s3_url(bucket(), "lister"), bytes, 10);
  // Pages of two through the client.
  auto config = remote::resolve_s3_config(s3_options(), remote::Environment::process());
  remote::S3Client client(*config, s3_options());
  auto p1 = client.list_page(bucket(), "list/", "", 2);
  REQUIRE_MESSAGE(p1.ok(), p1.status().to_string());
  CHECK(p1->objects.size() == 2);
  CHECK(p1->truncated);
  CHECK(p1->objects[0].key == "list/k0");
  CHECK(p1->objects[0].size == 10);
  auto p2 = client.list_page(bucket(), "list/", p1->next_continuation_token, 2);
  REQUIRE(p2.ok());
  CHECK(p2->objects[0].key == "list/k2");
  // All of them.
  auto all = list_objects(s3_url(bucket(), "list/"), s3_options());
  REQUIRE_MESSAGE(all.ok(), all.status().to_string());
  REQUIRE(all->size() == 8);
  CHECK((*all)[7].url == s3_url(bucket(), "list/sub/deeper"));
  CHECK(list_objects(s3_url(bucket(), "list/"), s3_options(), 5).status().code() ==
        StatusCode::kResourceExhausted);
  // Delete, then it is gone; deleting again is fine (as on S3); remove_object says NotFound.
  REQUIRE(delete_object(s3_url(bucket(), "list/k3"), s3_options()).ok());
  CHECK(stat_object(s3_url(bucket(), "list/k3"), s3_options()).status().is_not_found());
  CHECK(delete_object(s3_url(bucket(), "list/k3"), s3_options()).ok());
  CHECK(list_objects(s3_url(bucket(), "list/"), s3_options())->size() == 7);
}

TEST_CASE("s3: append_from copies on the server (UploadPartCopy) and reads through below 5 MiB") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const auto src_bytes = pattern_bytes(13 << 20, 9);
  const std::string src = s3_url(bucket(), "copy/src");
  put_bytes(src, src_bytes, 1 << 20);
  SinkOptions so;
  so.remote = s3_options();
  auto sink = create_sink(s3_url(bucket(), "copy/dst"), so).value();
  const auto head = pattern_bytes(100, 10), tail = pattern_bytes(50, 11);
  REQUIRE(sink->append(head).ok());
  REQUIRE(sink->append_from(src, 1000, 11 << 20).ok());  // 11 MiB: copies
  REQUIRE(sink->append_from(src, 5, 3 << 20).ok());      // 3 MiB: read through
  REQUIRE(sink->append(tail).ok());
  CHECK(sink->position() == 100 + (11u << 20) + (3u << 20) + 50);
  REQUIRE(sink->commit().ok());
  std::vector<std::byte> want(head);
  want.insert(want.end(), src_bytes.begin() + 1000, src_bytes.begin() + 1000 + (11 << 20));
  want.insert(want.end(), src_bytes.begin() + 5, src_bytes.begin() + 5 + (3 << 20));
  want.insert(want.end(), tail.begin(), tail.end());
  CHECK(get_bytes(s3_url(bucket(), "copy/dst")) == want);
  // Uploaded: the 100 bytes topped up to a 5 MiB first part (parts before the last must have
  // 5 MiB), and the 3 MiB + 50 bytes of the last part. The other 6 MiB were copied by the
  // server.
  const IoStats ws = sink->stats();
  MESSAGE("uploaded " << ws.bytes_written << " of " << want.size() << " bytes");
  CHECK(ws.bytes_written >= (5u << 20) + (3u << 20) + 50);
  CHECK(ws.bytes_written < (5u << 20) + (3u << 20) + 4096);
  // Past the source's end: an error.
  auto sink2 = create_sink(s3_url(bucket(), "copy/dst2"), so).value();
  CHECK_FALSE(sink2->append_from(src, src_bytes.size() - 10, 20).ok());
}

TEST_CASE("s3: append writes a new version (copies of the old bytes + the new generation)") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  for (size_t leaf_bytes : {size_t{200'000}, size_t{7'000'000}}) {  // below and above 5 MiB
    CAPTURE(leaf_bytes);
    const std::string url = s3_url(bucket(), "append/" + std::to_string(leaf_bytes) + ".jtree");
    const TestTree base = TestTree::make(1, leaf_bytes, 241);
    WriteOptions wo;
    wo.remote = s3_options();
    REQUIRE(save(base.tree(), url, wo).ok());
    OpenOptions oo;
    oo.remote = s3_options();
    auto old_reader = *Reader::open(url, oo);
    // Generation 1: w0 kept, w1 added.
    const auto extra = pattern_bytes(300'000, 242);
    TreeBuilder b;
    b.dict();
    b.key("w0").leaf(Leaf::reused(*old_reader->find_leaf("w0")));
    b.key("w1").array(DType::kUInt8, {extra.size()}, ArrayView{extra.data()});
    b.end();
    auto st = append(url, *std::move(b).finish(), wo);
    REQUIRE_MESSAGE(st.ok(), st.status().to_string());
    CHECK(st->generation == 1);
    auto r = *Reader::open(url, oo);
    CHECK(r->info().generation == 1);
    TestTree both = base;
    both.data.push_back(extra);
    check_tree(*r, both);
    auto v = r->verify();
    REQUIRE(v.ok());
    CHECK(v->ok());
    // The old object's bytes are the new one's prefix.
    const auto now = get_bytes(url);
    CHECK(now.size() == st->file_size);
    // A Reader of the old version notices the replacement.
    std::vector<std::byte> got(leaf_bytes);
    Status old_read = old_reader->read(*old_reader->find_leaf("w0"), got);
    CHECK(old_read.code() == StatusCode::kAborted);
  }
}

TEST_CASE("s3: virtual-hosted addressing (bucket.localhost)") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_VHOST_ENDPOINT");
  RemoteOptions o = s3_options();
  o.s3.endpoint = env("JTREE_TEST_S3_VHOST_ENDPOINT");
  o.s3.addressing = S3Addressing::kVirtual;
  const TestTree t = TestTree::make(2, 50000, 251);
  const std::string url = s3_url(bucket(), "vhost/v.jtree");
  WriteOptions wo;
  wo.remote = o;
  auto st = save(t.tree(), url, wo);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  check_tree(**Reader::open(url, open_with(o)), t);
  // Path-style sees the same object.
  check_tree(**Reader::open(url, open_with(s3_options())), t);
}

TEST_CASE("s3: credentials and endpoint from the environment and profile files") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const TestTree t = TestTree::make(1, 20000, 261);
  const std::string url = s3_url(bucket(), "env/e.jtree");
  ScopedEnv scoped;
  const std::string dir = "/tmp/jtree-aws-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  scoped.set("HOME", dir);
  scoped.unset("AWS_ACCESS_KEY_ID");
  scoped.unset("AWS_SECRET_ACCESS_KEY");
  scoped.unset("AWS_SESSION_TOKEN");
  scoped.unset("AWS_PROFILE");
  scoped.unset("AWS_SHARED_CREDENTIALS_FILE");
  scoped.unset("AWS_CONFIG_FILE");
  scoped.set("AWS_ENDPOINT_URL_S3", env("JTREE_TEST_S3_ENDPOINT"));
  RemoteOptions o = fast_options();  // no keys, no endpoint in the options
  // 1. Anonymous: refused, and the message says why.
  WriteOptions wo;
  wo.remote = o;
  auto anon = save(t.tree(), url, wo);
  REQUIRE_FALSE(anon.ok());
  CHECK(anon.status().code() == StatusCode::kPermissionDenied);
  CHECK(anon.status().message().find("no credentials were found") != std::string::npos);
  // 2. The environment.
  scoped.set("AWS_ACCESS_KEY_ID", env("JTREE_TEST_S3_KEY"));
  scoped.set("AWS_SECRET_ACCESS_KEY", env("JTREE_TEST_S3_SECRET"));
  REQUIRE(save(t.tree(), url, wo).ok());
  scoped.unset("AWS_ACCESS_KEY_ID");
  scoped.unset("AWS_SECRET_ACCESS_KEY");
  // 3. A profile in ~/.aws/credentials chosen by AWS_PROFILE, region from ~/.aws/config.
  std::filesystem::create_directories(dir + "/.aws");
  std::ofstream(dir + "/.aws/credentials")
      << "[default]\naws_access_key_id = WRONG\naws_secret_access_key = WRONG\n"
      << "[jtree]\naws_access_key_id = " << env("JTREE_TEST_S3_KEY")
      << "\naws_secret_access_key = " << env("JTREE_TEST_S3_SECRET") << "\n";
  std::ofstream(dir + "/.aws/config") << "[profile jtree]\nregion = us-east-1\n";
  auto wrong = Reader::open(url, open_with(o));
  CHECK(wrong.status().code() == StatusCode::kPermissionDenied);
  CHECK(wrong.status().message().find("profile \"default\"") != std::string::npos);
  scoped.set("AWS_PROFILE", "jtree");
  auto r = Reader::open(url, open_with(o));
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  check_tree(**r, t);
  std::filesystem::remove_all(dir);
}

TEST_CASE("s3: keys with spaces, '+', '%' and UTF-8") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  const auto bytes = pattern_bytes(6 << 20, 271);
  const std::string key = "odd keys/a+b %20 caf\xC3\xA9=~!*'().jtree";
  put_bytes(s3_url(bucket(), key), bytes, 1 << 20);
  CHECK(get_bytes(s3_url(bucket(), key)) == bytes);
  auto all = list_objects(s3_url(bucket(), "odd keys/"), s3_options());
  REQUIRE(all.ok());
  REQUIRE(all->size() >= 1);
  CHECK((*all)[0].url == s3_url(bucket(), key));
  // A server-side copy from such a key (without '%': Ceph RGW decodes x-amz-copy-source twice
  // and then misses the key; boto3 fails there the same way).
  const std::string src_key = "odd keys/a+b caf\xC3\xA9=~!*'().jtree";
  put_bytes(s3_url(bucket(), src_key), bytes, 1 << 20);
  SinkOptions so;
  so.remote = s3_options();
  auto sink = create_sink(s3_url(bucket(), "odd keys/copy"), so).value();
  REQUIRE(sink->append_from(s3_url(bucket(), src_key), 0, bytes.size()).ok());
  Status committed = sink->commit();
  REQUIRE_MESSAGE(committed.ok(), committed.to_string());
  CHECK(get_bytes(s3_url(bucket(), "odd keys/copy")) == bytes);
}

TEST_CASE("s3: a multi-host commit assembles the segments (server-side copies)") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  // Configured the way jobs usually are: through the environment.
  ScopedEnv scoped;
  scoped.set("AWS_ENDPOINT_URL_S3", env("JTREE_TEST_S3_ENDPOINT"));
  scoped.set("AWS_ACCESS_KEY_ID", env("JTREE_TEST_S3_KEY"));
  scoped.set("AWS_SECRET_ACCESS_KEY", env("JTREE_TEST_S3_SECRET"));
  scoped.set("AWS_REGION", "us-east-1");
  scoped.unset("AWS_PROFILE");
  // Two processes, each holding one 12 MiB row of a [2, 12 MiB] array.
  constexpr uint64_t kRow = 12u << 20;
  const auto full = pattern_bytes(2 * kRow, 281);
  const std::string target = s3_url(bucket(), "multihost/ckpt.jtree");
  SegmentOptions seg;
  seg.process_count = 2;
  seg.save_id = 12345;
  for (uint32_t k = 0; k < 2; ++k) {
    auto in = std::make_shared<LeafInput>();
    in->shard_shape = {1, kRow};
    in->shards.emplace();
    in->shards->push_back({Box{{k, 0}, {k + 1, kRow}}, ArrayView{full.data() + k * kRow}});
    Leaf l;
    l.kind = LeafKind::kArray;
    l.dtype = DType::kUInt8;
    l.shape = {2, kRow};
    l.storage = Storage::kChunked;
    l.input = std::move(in);
    TreeBuilder b;
    b.dict();
    b.key("w").leaf(l);
    b.end();
    seg.process_index = k;
    auto st = save_segment(*std::move(b).finish(), target, seg);
    REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  }
  auto st = commit_segments(target, 2);
  REQUIRE_MESSAGE(st.ok(), st.status().to_string());
  // Both blocks (segment 0 with the checkpoint head, segment 1) are over the 5 MiB part
  // minimum: they are copied on the server, and the commit uploads only the index and footer.
  CHECK(st->io.bytes_written > 0);
  CHECK(st->io.bytes_written < 4096);
  auto r = Reader::open(target);
  REQUIRE_MESSAGE(r.ok(), r.status().to_string());
  std::vector<std::byte> got(full.size());
  REQUIRE((*r)->read(*(*r)->find_leaf("w"), got).ok());
  CHECK(got == full);
  // The segments are gone.
  CHECK(stat_object(segment_path(target, 0, 2)).status().is_not_found());
  CHECK(stat_object(segment_path(target, 1, 2)).status().is_not_found());
}

// Writes an object with one plain PutObject, as a writer other than jtree would (a jtree
// sink's commit also aborts the older incomplete uploads of its key, which would end the
// upload under test before its commit is tried).
static void put_raw(const std::string& url, std::span<const std::byte> bytes) {
  auto config = remote::resolve_s3_config(s3_options(), remote::Environment::process());
  REQUIRE(config.ok());
  remote::S3Client client(*config, s3_options());
  auto loc = remote::parse_s3_url(url);
  REQUIRE(loc.ok());
  const Status st = client.put_object(*loc, bytes);
  REQUIRE_MESSAGE(st.ok(), st.to_string());
}

TEST_CASE("s3: an append's commit is conditional on the version it copied (If-Match)") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  // Below one part (PutObject on commit) and above (CompleteMultipartUpload on commit).
  for (size_t size : {size_t{100'000}, size_t{6u << 20}}) {
    CAPTURE(size);
    const std::string url = s3_url(bucket(), "if-match/" + std::to_string(size));
    const auto old_bytes = pattern_bytes(size, 51);
    put_bytes(url, old_bytes, size);
    const std::string planned = stat_object(url, s3_options())->etag;
    SinkOptions so;
    so.remote = s3_options();
    auto sink = open_append_sink(url, size, so, planned);
    REQUIRE_MESSAGE(sink.ok(), sink.status().to_string());
    const auto more = pattern_bytes(1000, 52);
    REQUIRE((*sink)->append(more).ok());
    // Another writer replaces the object between this append's copy and its commit.
    const auto other = pattern_bytes(size, 53);
    put_raw(url, other);
    const Status st = (*sink)->commit();
    if (size < (5u << 20)) {
      CHECK(st.code() == StatusCode::kAborted);
      CHECK(st.message().find("changed since this append was planned") != std::string::npos);
      CHECK(st.message().find("412") != std::string::npos);
      CHECK(get_bytes(url) == other);
    } else {
      // Ceph RGW 16 (the suite's) ignores If-Match on CompleteMultipartUpload: the append
      // commits over the other writer's object (docs/remote.md says so; AWS S3 refuses it
      // with 412, and the header is checked on the wire by test_s3_conditional.cc). If this
      // fails because RGW now honours it, assert Aborted here as above and update the docs.
      CHECK_MESSAGE(st.ok(), st.to_string());
      CHECK(get_bytes(url).size() == size + more.size());
    }
  }
}

TEST_CASE("s3: a save that must not overwrite is conditional on commit (If-None-Match)") {
  JTREE_NEED_SERVER("JTREE_TEST_S3_ENDPOINT");
  for (size_t size : {size_t{100'000}, size_t{6u << 20}}) {
    CAPTURE(size);
    const std::string url = s3_url(bucket(), "if-none-match/" + std::to_string(size));
    SinkOptions so;
    so.remote = s3_options();
    so.overwrite = false;
    auto sink = create_sink(url, so);
    REQUIRE_MESSAGE(sink.ok(), sink.status().to_string());
    REQUIRE((*sink)->append(pattern_bytes(size, 61)).ok());
    // Another writer creates the object before this save commits.
    const auto other = pattern_bytes(1000, 62);
    put_raw(url, other);
    const Status st = (*sink)->commit();
    if (size < (5u << 20)) {
      CHECK(st.code() == StatusCode::kAlreadyExists);
      CHECK(st.message().find("the object exists") != std::string::npos);
      CHECK(get_bytes(url) == other);
    } else {
      // RGW 16 ignores If-None-Match on CompleteMultipartUpload too (see the If-Match case).
      CHECK_MESSAGE(st.ok(), st.to_string());
      CHECK(get_bytes(url) == pattern_bytes(size, 61));
    }
    // And where nothing appeared, the conditional commit succeeds.
    const std::string fresh = url + "-fresh";
    auto sink2 = create_sink(fresh, so);
    REQUIRE(sink2.ok());
    REQUIRE((*sink2)->append(pattern_bytes(size, 63)).ok());
    const Status st2 = (*sink2)->commit();
    CHECK_MESSAGE(st2.ok(), st2.to_string());
    CHECK(get_bytes(fresh) == pattern_bytes(size, 63));
  }
}
