// jtree_remote_tool — what tests/remote/test_boto.py needs from the C++ side:
//
//   write URL SEED LEAVES BYTES      save a deterministic tree (leaves w0.. of BYTES each)
//   write-cancel URL SEED LEAVES BYTES  the same save, cancelled halfway (must leave nothing)
//   check URL SEED LEAVES BYTES      load it and compare every leaf, bit for bit
//   put URL FILE                     copy FILE's bytes into a new object (a Sink)
//   get URL FILE                     copy an object's bytes into FILE (a Source)
//   stats URL                        open URL, print the Reader's counters as JSON
//   sign ENDPOINT BUCKET KEY METHOD UNIXTIME [q:NAME=VALUE | h:Name: value | body:FILE]...
//                                    print the URL and Authorization of an S3 request, as
//                                    jtree would send it (credentials from AWS_ACCESS_KEY_ID,
//                                    AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION)
//
// S3 settings come from the environment (AWS_ENDPOINT_URL_S3, credentials...). Exit status 0
// on success; errors on stderr.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "io/remote/s3_client.h"
#include "jtree/jtree.h"

using namespace jtree;

namespace {

int fail(const Status& st) {
  std::fprintf(stderr, "jtree_remote_tool: %s\n", st.to_string().c_str());
  return 1;
}

std::vector<std::byte> leaf_bytes(uint64_t seed, int leaf, size_t n) {
  std::mt19937_64 g(seed * 1000 + static_cast<uint64_t>(leaf));
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t x = g();
    for (size_t k = 0; k < 8 && i + k < n; ++k) v[i + k] = static_cast<std::byte>(x >> (8 * k));
  }
  return v;
}

int cmd_write(const std::string& url, uint64_t seed, int leaves, size_t bytes, bool cancel) {
  std::vector<std::vector<std::byte>> data;
  TreeBuilder b;
  b.dict();
  for (int i = 0; i < leaves; ++i) {
    data.push_back(leaf_bytes(seed, i, bytes));
    b.key("w" + std::to_string(i)).array(DType::kUInt8, {bytes}, ArrayView{data.back().data()});
  }
  b.key("seed").int_value(static_cast<int64_t>(seed));
  b.end();
  auto tree = std::move(b).finish();
  if (!tree.ok()) return fail(tree.status());
  WriteOptions wo;
  const uint64_t half = static_cast<uint64_t>(leaves) * bytes / 2;
  if (cancel) wo.progress = [half](uint64_t done, uint64_t) { return done < half; };
  auto st = save(std::move(*tree), url, wo);
  if (!st.ok()) return fail(st.status());
  std::printf("{\"file_size\": %llu}\n", static_cast<unsigned long long>(st->file_size));
  return 0;
}

int cmd_check(const std::string& url, uint64_t seed, int leaves, size_t bytes) {
  auto r = Reader::open(url);
  if (!r.ok()) return fail(r.status());
  for (int i = 0; i < leaves; ++i) {
    auto leaf = (*r)->find_leaf("w" + std::to_string(i));
    if (!leaf.ok()) return fail(leaf.status());
    std::vector<std::byte> got(bytes);
    Status st = (*r)->read(*leaf, got);
    if (!st.ok()) return fail(st);
    if (got != leaf_bytes(seed, i, bytes)) {
      return fail(Status::corruption(url + ": leaf w" + std::to_string(i) + " differs"));
    }
  }
  auto v = (*r)->verify();
  if (!v.ok()) return fail(v.status());
  if (!v->ok()) return fail(Status::corruption(url + ": " + v->problems[0].where));
  std::printf("ok\n");
  return 0;
}

int cmd_put(const std::string& url, const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto sink = create_sink(url);
  if (!sink.ok()) return fail(sink.status());
  Status st = (*sink)->append(std::as_bytes(std::span(bytes)));
  if (st.ok()) st = (*sink)->commit();
  if (!st.ok()) return fail(st);
  return 0;
}

int cmd_get(const std::string& url, const std::string& file) {
  auto src = open_source(url);
  if (!src.ok()) return fail(src.status());
  auto size = (*src)->size();
  if (!size.ok()) return fail(size.status());
  std::vector<std::byte> bytes(*size);
  ReadRange r{0, bytes};
  Status st = (*src)->read(std::span(&r, 1));
  if (!st.ok()) return fail(st);
  std::ofstream(file, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return 0;
}

int cmd_stats(const std::string& url) {
  auto r = Reader::open(url);
  if (!r.ok()) return fail(r.status());
  const IoStats s = (*r)->io_stats();
  std::printf("{\"requests\": %llu, \"bytes_read\": %llu, \"retries\": %llu}\n",
              static_cast<unsigned long long>(s.read_requests),
              static_cast<unsigned long long>(s.bytes_read),
              static_cast<unsigned long long>(s.retries));
  return 0;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

int cmd_sign(int argc, char** argv) {
  RemoteOptions o;
  o.s3.endpoint = argv[2];
  auto config = remote::resolve_s3_config(o, remote::Environment::process());
  if (!config.ok()) return fail(config.status());
  const std::string bucket = argv[3], key = argv[4];
  remote::HttpRequest req;
  req.method = argv[5];
  const int64_t now = std::stoll(argv[6]);
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<char> body;
  for (int i = 7; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("q:", 0) == 0) {
      const size_t eq = a.find('=');
      query.emplace_back(a.substr(2, eq - 2), eq == std::string::npos ? "" : a.substr(eq + 1));
    } else if (a.rfind("h:", 0) == 0) {
      req.headers.push_back(a.substr(2));
    } else if (a.rfind("body:", 0) == 0) {
      std::ifstream in(a.substr(5), std::ios::binary);
      body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  req.body = std::as_bytes(std::span(body));
  remote::prepare_s3_request(*config, bucket, key, query, "", req, now);
  std::string auth;
  std::string headers = "{";
  for (const std::string& h : req.headers) {
    const size_t colon = h.find(':');
    std::string name = h.substr(0, colon), value = h.substr(colon + 2);
    if (name == "Authorization") auth = value;
    if (headers.size() > 1) headers += ", ";
    headers += json_string(name) + ": " + json_string(value);
  }
  headers += "}";
  std::printf("{\"url\": %s, \"authorization\": %s, \"headers\": %s}\n", json_string(req.url).c_str(),
              json_string(auth).c_str(), headers.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if ((cmd == "write" || cmd == "write-cancel" || cmd == "check") && argc == 6) {
    const uint64_t seed = std::stoull(argv[3]);
    const int leaves = std::stoi(argv[4]);
    const size_t bytes = std::stoull(argv[5]);
    if (cmd == "check") return cmd_check(argv[2], seed, leaves, bytes);
    return cmd_write(argv[2], seed, leaves, bytes, cmd == "write-cancel");
  }
  if (cmd == "put" && argc == 4) return cmd_put(argv[2], argv[3]);
  if (cmd == "get" && argc == 4) return cmd_get(argv[2], argv[3]);
  if (cmd == "stats" && argc == 3) return cmd_stats(argv[2]);
  if (cmd == "sign" && argc >= 7) return cmd_sign(argc, argv);
  std::fprintf(stderr, "usage: see the comment at the top of tests/remote/remote_tool.cc\n");
  return 2;
}
