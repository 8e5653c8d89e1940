// Generates the committed seed corpora (fuzz/corpus/<target>/) from valid files written with
// every writer option: codecs, filters, levels, alignments, inline thresholds, chunk grids,
// every dtype and node kind, appended and torn generations, compacted and segment files. Run by
// fuzz/make_corpus.sh; deterministic apart from the random segment salts the writer picks.
//
//   fuzz_make_corpus OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "codec/chunk_codec.h"
#include "fuzz_util.h"

using namespace jtree;
namespace fs = std::filesystem;
using Bytes = std::vector<std::byte>;

namespace {

std::string g_out;
size_t g_files = 0, g_bytes = 0;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "make_corpus: %s\n", what.c_str());
  std::exit(1);
}

void put(const std::string& target, const std::string& name, const Bytes& payload,
         std::initializer_list<uint8_t> trailer) {
  const fs::path dir = fs::path(g_out) / target;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(payload.data()),
            static_cast<std::streamsize>(payload.size()));
  for (uint8_t b : trailer) out.put(static_cast<char>(b));
  if (!out) die("cannot write " + (dir / name).string());
  ++g_files;
  g_bytes += payload.size() + trailer.size();
}

Bytes text(std::string_view s) {
  return Bytes(reinterpret_cast<const std::byte*>(s.data()),
               reinterpret_cast<const std::byte*>(s.data()) + s.size());
}

Bytes read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Bytes b(c.size());
  if (!c.empty()) std::memcpy(b.data(), c.data(), c.size());
  return b;
}

Bytes pattern(size_t n, uint32_t seed, bool smooth) {
  Bytes v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<std::byte>(smooth ? (i / 7 + (x >> 30)) : (x >> 24));
  }
  return v;
}

// The data of the trees below lives here (the writer reads it during save).
std::vector<Bytes> g_data;
const std::byte* keep(Bytes b) {
  g_data.push_back(std::move(b));
  return g_data.back().data();
}

// Every dtype as a 7x5 array in 3x2 chunks (edge chunks clipped), with a per-leaf filter.
Tree dtypes_tree(std::optional<Filter> filter) {
  TreeBuilder b;
  b.dict();
  for (int code = 1; code < kDTypeCodeEnd; ++code) {
    const DType d = static_cast<DType>(code);
    const auto info = *dtype_info(d);
    Bytes mem = pattern(35 * info.item_size, code, info.float_component > 0);
    if (is_4bit(d)) {
      for (auto& x : mem) x = static_cast<std::byte>(static_cast<uint8_t>(x) & 0x0f);
    }
    if (d == DType::kBool) {
      for (auto& x : mem) x = static_cast<std::byte>(static_cast<uint8_t>(x) & 1);
    }
    LeafOptions o;
    o.chunk_shape = {3, 2};
    if (filter && codec::filter_allowed(*filter, d)) o.filter = filter;
    b.key(std::string(info.name)).array(d, {7, 5}, ArrayView{keep(std::move(mem))}, o);
  }
  b.end();
  return std::move(*std::move(b).finish());
}

// Every node kind, key kind, scalar and payload kind; tied leaves; metadata.
Tree structure_tree() {
  TreeBuilder b;
  b.dict();
  b.key("params").dict();
  b.key("w").array(DType::kFloat32, {16, 8}, ArrayView{keep(pattern(16 * 8 * 4, 7, true))});
  b.key("b").array(DType::kBFloat16, {8}, ArrayView{keep(pattern(16, 8, true))});
  b.end();
  b.key("layers").list();
  for (int i = 0; i < 3; ++i) {
    b.tuple();
    b.array(DType::kInt8, {40}, ArrayView{keep(pattern(40, 20 + i, false))});
    b.none();
    b.end();
  }
  b.end();
  b.key("point").named_tuple("Point").key("x").float_value(1.5).key("y").int_value(-2).end();
  b.key("od").ordered_dict().key(7).str("seven").key("z").bytes(std::string(300, 'z')).end();
  b.key("custom").custom("my.Custom", "aux bytes").key("a").bool_value(true).end();
  b.key("c").complex_value(1.0, -2.0);
  b.key("big_text").str(std::string(5000, 'q'));
  b.key("empty").array(DType::kFloat64, {0, 3}, ArrayView{});
  b.key("scalar").array(DType::kInt64, {}, ArrayView{keep(pattern(8, 9, false))});
  b.key("tied").tied(0);  // leaf 0 is "w": leaf ids follow the builder's order
  b.key("sl/ash\\").int_value(1);
  b.end();
  b.metadata("framework", "fuzz");
  return std::move(*std::move(b).finish());
}

// One bigger leaf whose planes compress well (and one that does not).
Tree planes_tree() {
  TreeBuilder b;
  b.dict();
  b.key("smooth").array(DType::kFloat32, {64, 64}, ArrayView{keep(pattern(64 * 64 * 4, 3, true))});
  b.key("zeros").array(DType::kUInt16, {2048}, ArrayView{keep(Bytes(4096))});
  b.key("noise").array(DType::kUInt8, {3000}, ArrayView{keep(pattern(3000, 4, false))});
  b.end();
  return std::move(*std::move(b).finish());
}

Tree scalar_tree() {
  TreeBuilder b;
  b.float_value(3.25);
  return std::move(*std::move(b).finish());
}

Bytes save_bytes(Tree t, const WriteOptions& wo) {
  fuzz::MemorySink sink;
  auto st = save(std::move(t), sink, wo);
  if (!st.ok()) die("save: " + st.status().to_string());
  return std::move(sink.bytes());
}

struct Region {
  uint64_t offset, size;
};

// The seeds of every target from one valid file.
void seeds_from_file(const std::string& name, const Bytes& f) {
  // open: as is; hashes repaired (a hostile writer); small first reads (third read path);
  // tight limits.
  put("open", name, f, {0, 0, 0, 0, 0, 0, 0, 0});
  put("open", name + "-rehash-small-reads", f, {1, 0, 0, 1, 0, 0, 0, 0});
  // read: verified; unverified with chunk hashes repaired and every API on.
  put("read", name, f, {0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0});
  put("read", name + "-all-apis", f, {2, 0x0f, 1, 0, 9, 8, 7, 6, 5, 4, 3, 2, 0, 0, 0, 0});
  put("layout", name, [&] {
    Bytes b(f.begin(), f.begin() + 128);
    b.insert(b.end(), f.end() - 128, f.end());
    return b;
  }(), {});

  auto r = Reader::open(memory_source(f, name));
  if (!r.ok()) die(name + ": " + r.status().to_string());
  const FileInfo& info = (*r)->info();
  const Bytes header(f.begin() + static_cast<ptrdiff_t>(info.header_offset),
                     f.begin() + static_cast<ptrdiff_t>(info.header_offset + info.header_size));
  const Bytes index(f.begin() + static_cast<ptrdiff_t>(info.index_offset),
                    f.begin() + static_cast<ptrdiff_t>(info.index_offset + info.index_size));
  put("header", name, header, {0, 0});
  Bytes both = header;
  both.insert(both.end(), index.begin(), index.end());
  const uint32_t hl = static_cast<uint32_t>(header.size());
  put("index", name, both,
      {static_cast<uint8_t>(hl), static_cast<uint8_t>(hl >> 8), static_cast<uint8_t>(hl >> 16),
       static_cast<uint8_t>(hl >> 24), 0, 0, 0, 0});

  // chunk_codec: the first chunks of each leaf, with their leaf's format.
  const Tree& t = (*r)->tree();
  for (uint32_t l = 0; l < t.leaves.size(); ++l) {
    const Leaf& leaf = t.leaves[l];
    if (leaf.storage != Storage::kChunked) continue;
    for (uint64_t k = 0; k < std::min<uint64_t>(Tree::chunk_count(leaf), 2); ++k) {
      const ChunkInfo c = (*r)->chunk(leaf.first_chunk + k);
      if (c.absent || c.raw_size > 0xffff) continue;
      const Bytes stored(f.begin() + static_cast<ptrdiff_t>(c.file_offset),
                         f.begin() + static_cast<ptrdiff_t>(c.file_offset + c.stored_size));
      put("chunk_codec", name + "-leaf" + std::to_string(l) + "-chunk" + std::to_string(k),
          stored,
          {static_cast<uint8_t>(static_cast<uint8_t>(leaf.dtype) - 1),
           static_cast<uint8_t>(leaf.filter), static_cast<uint8_t>(leaf.codec),
           static_cast<uint8_t>(c.encoding), static_cast<uint8_t>(c.raw_size),
           static_cast<uint8_t>(c.raw_size >> 8), 1, 0});
    }
  }
}

void valid_files() {
  struct Variant {
    std::string name;
    std::function<Tree()> tree;
    WriteOptions wo;
  };
  std::vector<Variant> v;
  WriteOptions base;
  base.writer = "fuzz corpus";
  base.inline_threshold = 64;
  base.threads = 1;
  auto with = [&](auto edit) {
    WriteOptions o = base;
    edit(o);
    return o;
  };
  v.push_back({"dtypes-zstd-default", [] { return dtypes_tree(std::nullopt); }, base});
  v.push_back({"dtypes-raw", [] { return dtypes_tree(std::nullopt); },
               with([](WriteOptions& o) { o.codec = Codec::kRaw; })});
  v.push_back({"dtypes-filter-none", [] { return dtypes_tree(Filter::kNone); },
               with([](WriteOptions& o) { o.min_gain = 0; })});
  v.push_back({"dtypes-shuffle", [] { return dtypes_tree(Filter::kShuffle); },
               with([](WriteOptions& o) { o.min_gain = 0; })});
  v.push_back({"dtypes-floatsplit-level19", [] { return dtypes_tree(Filter::kFloatSplit); },
               with([](WriteOptions& o) {
                 o.min_gain = 0;
                 o.level = 19;
               })});
  v.push_back({"dtypes-align1-fast", [] { return dtypes_tree(std::nullopt); },
               with([](WriteOptions& o) {
                 o.alignment = 1;
                 o.level = -5;
                 o.min_gain = -1;
               })});
  v.push_back({"structure-default", structure_tree, base});
  v.push_back({"structure-all-inline", structure_tree,
               with([](WriteOptions& o) { o.inline_threshold = 1 << 20; })});
  v.push_back({"structure-none-inline-align4096", structure_tree,
               with([](WriteOptions& o) {
                 o.inline_threshold = 0;
                 o.alignment = 4096;
               })});
  v.push_back({"planes-default", planes_tree, with([](WriteOptions& o) {
                 o.target_chunk_bytes = 4096;
               })});
  v.push_back({"planes-big-chunks-raw", planes_tree, with([](WriteOptions& o) {
                 o.codec = Codec::kRaw;
               })});
  v.push_back({"scalar-root", scalar_tree, base});
  for (auto& var : v) seeds_from_file(var.name, save_bytes(var.tree(), var.wo));
}

// Files that need a real path: appended generations, a torn append, compaction, segments.
void file_based() {
  const fs::path dir = fs::temp_directory_path() / "jtree-make-corpus";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string p = (dir / "a.jtree").string();
  WriteOptions wo;
  wo.inline_threshold = 64;
  wo.threads = 1;
  wo.sync = false;
  if (!save(planes_tree(), p, wo).ok()) die("save a.jtree");
  for (int gen = 1; gen <= 2; ++gen) {
    auto r = Reader::open(p);
    if (!r.ok()) die(r.status().to_string());
    Tree t = (*r)->tree();
    for (uint32_t i = 0; i < t.leaves.size(); ++i) t.leaves[i] = Leaf::reused(i);
    // Replace the last leaf with new data (generation after generation).
    const uint32_t last = static_cast<uint32_t>(t.leaves.size() - 1);
    Leaf fresh;
    fresh.kind = LeafKind::kArray;
    fresh.dtype = DType::kUInt8;
    fresh.shape = {3000};
    auto in = std::make_shared<LeafInput>();
    in->source = ArrayView{keep(pattern(3000, 40 + gen, gen == 2))};
    fresh.input = std::move(in);
    t.leaves[last] = fresh;
    r->reset();
    if (!append(p, std::move(t), wo).ok()) die("append");
    seeds_from_file("appended-gen" + std::to_string(gen), read_all(p));
  }
  Bytes torn = read_all(p);
  const Bytes junk = pattern(700, 77, false);
  torn.insert(torn.end(), junk.begin(), junk.end());
  put("open", "torn-append", torn, {0, 0, 0, 0, 0, 0, 0, 0});
  put("read", "torn-append", torn, {0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0});
  const std::string c = (dir / "c.jtree").string();
  if (!compact(p, c, wo).ok()) die("compact");
  seeds_from_file("compacted", read_all(c));

  // Two segments of a multi-process save: absent chunks, segment info.
  for (uint32_t proc = 0; proc < 2; ++proc) {
    TreeBuilder b;
    Leaf l;
    b.dict();
    Bytes mem = pattern(8 * 6 * 4, 50, true);
    auto in = std::make_shared<LeafInput>();
    in->shard_shape = {4, 6};
    Shard sh;
    sh.box = Box{{proc * 4, 0}, {proc * 4 + 4, 6}};
    sh.view = ArrayView{keep(Bytes(mem.begin() + proc * 96, mem.begin() + proc * 96 + 96))};
    in->shards = std::vector<Shard>{sh};
    l.kind = LeafKind::kArray;
    l.dtype = DType::kFloat32;
    l.shape = {8, 6};
    l.input = std::move(in);
    b.key("sharded").leaf(l);
    b.end();
    SegmentOptions so;
    so.process_index = proc;
    so.process_count = 2;
    so.save_id = 1234;
    const std::string target = (dir / "m.jtree").string();
    WriteOptions swo = wo;
    swo.target_chunk_bytes = 32;
    if (!save_segment(std::move(*std::move(b).finish()), target, so, swo).ok()) {
      die("save_segment");
    }
    seeds_from_file("segment" + std::to_string(proc),
                    read_all(segment_path(target, proc, 2)));
  }
  fs::remove_all(dir);
}

void golden_files(const std::string& golden) {
  for (const char* sub : {"valid", "broken"}) {
    for (const auto& e : fs::directory_iterator(fs::path(golden) / sub)) {
      const Bytes b = read_all(e.path().string());
      if (b.size() > 64 * 1024) continue;  // the corpus stays small
      const std::string name = std::string("golden-") + sub + "-" + e.path().stem().string();
      put("open", name, b, {0, 0, 0, 0, 0, 0, 0, 0});
      put("read", name, b, {0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0});
    }
  }
}

void text_seeds() {
  const char* ranges[] = {"bytes 0-99/1234", "bytes 0-99/*", "bytes */1234",
                          " bytes 100-199/200 ", "bytes 5-4/10", "bytes 0-18446744073709551615/*",
                          "bytes 9999999999999999999-9999999999999999999/*", "Bytes 0-0/1",
                          "bytes=0-99", "12345"};
  int i = 0;
  for (const char* r : ranges) put("content_range", "seed" + std::to_string(i++), text(r), {});
  const char* docs[] = {
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code><Message>The "
      "specified key does not exist.</Message><RequestId>4442587FB7D0A2F9</RequestId>"
      "</Error>",
      "<Error><Code>AuthorizationHeaderMalformed</Code><Message>region</Message>"
      "<Region>eu-west-1</Region></Error>",
      "<?xml version=\"1.0\"?><InitiateMultipartUploadResult xmlns=\"http://s3.amazonaws.com/"
      "doc/2006-03-01/\"><Bucket>b</Bucket><Key>k</Key><UploadId>VXBsb2FkIElE&amp;x</UploadId>"
      "</InitiateMultipartUploadResult>",
      "<CompleteMultipartUploadResult><Location>http://b/k</Location><Bucket>b</Bucket>"
      "<Key>k</Key><ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag>"
      "</CompleteMultipartUploadResult>",
      "<CopyPartResult><LastModified>2009-10-28T22:32:00</LastModified><ETag>"
      "\"9b2cf535f27731c974343645a3985328\"</ETag></CopyPartResult>",
      "<ListBucketResult><Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/"
      "wm36Hy4vbOwM=</NextContinuationToken><Contents><Key>p/a.jtree</Key><Size>1234</Size>"
      "<ETag>&quot;e1&quot;</ETag></Contents><Contents><Key><![CDATA[p/b&c]]></Key>"
      "<Size>0</Size><ETag>e2</ETag></Contents><CommonPrefixes><Prefix>p/d/</Prefix>"
      "</CommonPrefixes></ListBucketResult>",
      "<!DOCTYPE x [<!ENTITY a \"b\">]><Error><Code>&a;</Code></Error>",
      "<Error><Code>&#x41;&#66;</Code><Message>&lt;&gt;&apos;</Message></Error>",
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListMultipartUploadsResult xmlns=\"http://"
      "s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket><KeyMarker></KeyMarker>"
      "<UploadIdMarker></UploadIdMarker><NextKeyMarker>p/a.jtree.seg-00001-of-00002"
      "</NextKeyMarker><NextUploadIdMarker>2~x</NextUploadIdMarker><Prefix>p/a.jtree</Prefix>"
      "<MaxUploads>2</MaxUploads><IsTruncated>true</IsTruncated><Upload><Key>p/a.jtree</Key>"
      "<UploadId>2~abc&amp;d</UploadId><Initiator><ID>i</ID></Initiator><StorageClass>STANDARD"
      "</StorageClass><Initiated>2026-11-25T15:40:00.123Z</Initiated></Upload><Upload><Key>"
      "<![CDATA[p/a.jtree.seg-00001-of-00002]]></Key><UploadId>2~x</UploadId><Initiated>"
      "2026-11-25T15:40:01Z</Initiated></Upload></ListMultipartUploadsResult>",
      "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>"};
  i = 0;
  for (const char* d : docs) {
    for (uint8_t parser = 0; parser < 6; ++parser) {
      put("s3_xml", "doc" + std::to_string(i) + "-parser" + std::to_string(parser), text(d),
          {parser});
    }
    ++i;
  }
}

void roundtrip_seeds() {
  // Tree descriptions are read byte by byte from the front (fuzz_roundtrip.cc): a few
  // hand-written shapes, then random ones.
  auto bytes = [](std::initializer_list<int> v) {
    Bytes b;
    for (int x : v) b.push_back(static_cast<std::byte>(x));
    return b;
  };
  put("roundtrip", "array", bytes({0, 12, 2, 9, 3}), {1, 1, 6, 0, 0, 0, 0, 1});
  put("roundtrip", "dict", bytes({12, 0, 4, 1, 0, 5, 2, 1, 3, 7, 0, 10, 8}),
      {1, 3, 4, 1, 3, 1, 1, 2});
  for (uint32_t s = 0; s < 24; ++s) {
    Bytes b = pattern(64 + s * 40, 1000 + s, false);
    put("roundtrip", "random" + std::to_string(s), b,
        {static_cast<uint8_t>(s), static_cast<uint8_t>(s * 3), static_cast<uint8_t>(s % 12),
         static_cast<uint8_t>(s), static_cast<uint8_t>(s % 4), static_cast<uint8_t>(s),
         static_cast<uint8_t>(s), static_cast<uint8_t>(s)});
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) die("usage: fuzz_make_corpus OUT_DIR GOLDEN_DIR");
  g_out = argv[1];
  valid_files();
  file_based();
  golden_files(argv[2]);
  text_seeds();
  roundtrip_seeds();
  std::printf("wrote %zu seeds, %zu bytes, under %s\n", g_files, g_bytes, g_out.c_str());
  return 0;
}
