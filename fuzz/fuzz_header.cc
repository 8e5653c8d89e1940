// Fuzz target: the header flatbuffer alone — verification, decoding, the tree's structure
// checks (finalize) and the leaf spec checks (validate_leaves), without the hashes in the way.
// A header that passes is re-encoded: decoding the re-encoded bytes must accept them and give
// the same encoding again (no field is lost or invented on the way). The fused decoder that
// Reader::open uses (format::decode_tree) must agree with the three steps: the same status,
// and for an accepted header the same encoding and chunk count. So must the check-only open
// (format::open_header, which Reader::open uses): the same status, summary and leaf starts, and
// its in-place nodes, leaves (also their grid-only decode, HeaderView::decode_grid, which the
// index checks use), paths and metadata equal to the decoded tree's, and so must the Tree it
// builds from them without checking again (HeaderView::decode_all).
//
// Options (the input's last 2 bytes): [0] parser limits.
#include <cstring>
#include <memory>

#include "format/header_codec.h"
#include "format/validate.h"
#include "fuzz_util.h"
#include "tree/structure.h"

using namespace jtree;

namespace {

Result<Tree> decode_and_check(std::span<const std::byte> bytes, const Limits& limits) {
  std::string writer;
  JTREE_ASSIGN_OR_RETURN(Tree t, format::decode_header(bytes, limits, &writer));
  Status st = t.finalize(limits.max_depth);
  if (!st.ok()) return format::structure_error(st);
  JTREE_RETURN_IF_ERROR(format::validate_leaves(t, limits).status());
  return t;
}

// open_header's view of an accepted header against decode_tree's Tree.
void check_same_tree(const format::HeaderView& v, const Tree& t,
                     const format::HeaderSummary& vs, const format::HeaderSummary& ts) {
  JTREE_FUZZ_CHECK(vs.chunks == ts.chunks && vs.inline_bytes == ts.inline_bytes &&
                       vs.raw_bytes == ts.raw_bytes,
                   "open_header's summary differs");
  JTREE_FUZZ_CHECK(v.num_nodes() == t.nodes.size() && v.num_leaves() == t.leaves.size(),
                   "open_header's counts differ");
  JTREE_FUZZ_CHECK(v.metadata() == t.metadata, "open_header's metadata differs");
  for (uint32_t i = 0; i < t.nodes.size(); ++i) {
    const NodeView a = v.node(i), b = t.nodes[i].view();
    JTREE_FUZZ_CHECK(a.key == b.key && a.kind == b.kind && a.num_children == b.num_children &&
                         a.leaf == b.leaf && a.type_name == b.type_name &&
                         a.aux_data == b.aux_data,
                     "open_header's node " + std::to_string(i) + " differs");
    JTREE_FUZZ_CHECK(v.navigation().subtree_end[i] == t.subtree_end(i) &&
                         v.navigation().parent[i] == t.parent(i) &&
                         node_path(v.nodes(), v.navigation(), i) == t.path(i),
                     "open_header's navigation differs at node " + std::to_string(i));
  }
  std::vector<uint32_t> chunked;
  Leaf l, g;
  for (uint32_t i = 0; i < t.leaves.size(); ++i) {
    v.decode_leaf(i, l);
    const Leaf& w = t.leaves[i];
    if (w.storage == Storage::kChunked) chunked.push_back(i);
    JTREE_FUZZ_CHECK(v.first_chunk(i) == w.first_chunk && l.first_chunk == w.first_chunk &&
                         l.kind == w.kind && l.flags == w.flags && l.dtype == w.dtype &&
                         l.storage == w.storage && l.filter == w.filter && l.codec == w.codec &&
                         l.level == w.level && l.shape == w.shape &&
                         l.chunk_shape == w.chunk_shape && l.chunk_bounds == w.chunk_bounds &&
                         l.inline_data == w.inline_data &&
                         l.type_name == w.type_name && l.big_int == w.big_int &&
                         l.int_value == w.int_value && l.bool_value == w.bool_value &&
                         std::memcmp(&l.real, &w.real, sizeof l.real) == 0 &&
                         std::memcmp(&l.imag, &w.imag, sizeof l.imag) == 0,
                     "open_header's leaf " + std::to_string(i) + " differs");
    // The grid-only decode the index checks use, into one scratch leaf as they do.
    v.decode_grid(i, g);
    JTREE_FUZZ_CHECK(g.first_chunk == w.first_chunk && g.kind == w.kind && g.flags == w.flags &&
                         g.dtype == w.dtype && g.storage == w.storage && g.filter == w.filter &&
                         g.codec == w.codec && g.level == w.level && g.shape == w.shape &&
                         g.chunk_shape == w.chunk_shape && g.chunk_bounds == w.chunk_bounds,
                     "open_header's grid of leaf " + std::to_string(i) + " differs");
  }
  JTREE_FUZZ_CHECK(std::equal(chunked.begin(), chunked.end(), v.chunked_leaves().begin(),
                              v.chunked_leaves().end()),
                   "open_header's chunked leaves differ");
  // The whole Tree built from the checked header without checking it again.
  auto all = v.decode_all();
  JTREE_FUZZ_CHECK(all.ok(), "decode_all refused a checked header: " + all.status().to_string());
  auto a = format::encode_header(*all, "fuzz"), b = format::encode_header(t, "fuzz");
  JTREE_FUZZ_CHECK(a.ok() && b.ok() && *a == *b, "decode_all decodes another tree");
  for (uint32_t i = 0; i < t.leaves.size(); ++i) {
    JTREE_FUZZ_CHECK(all->leaves[i].first_chunk == t.leaves[i].first_chunk,
                     "decode_all's first_chunk differs at leaf " + std::to_string(i));
  }
  JTREE_FUZZ_CHECK(t.nodes.empty() || all->path(static_cast<uint32_t>(t.nodes.size() - 1)) ==
                                          t.path(static_cast<uint32_t>(t.nodes.size() - 1)),
                   "decode_all's navigation differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Split<2> in(data, size);
  const Limits limits = fuzz::limits_for(in.opt[0]);
  auto t = decode_and_check(in.payload, limits);
  std::string writer;
  format::HeaderSummary summary;
  auto fused = format::decode_tree(in.payload, limits, &writer, &summary);
  JTREE_FUZZ_CHECK(fused.ok() == t.ok() &&
                       (t.ok() || fused.status().to_string() == t.status().to_string()),
                   "decode_tree says " + fused.status().to_string() + ", the three steps " +
                       t.status().to_string());
  auto owned = std::make_unique<std::byte[]>(in.payload.size() + 1);  // (new[]: aligned)
  if (!in.payload.empty()) std::memcpy(owned.get(), in.payload.data(), in.payload.size());
  format::HeaderSummary open_summary;
  auto opened = format::open_header(std::move(owned), in.payload.size(), limits, nullptr,
                                    &open_summary);
  JTREE_FUZZ_CHECK(opened.ok() == t.ok() &&
                       (t.ok() || opened.status().to_string() == t.status().to_string()),
                   "open_header says " + opened.status().to_string() + ", the three steps " +
                       t.status().to_string());
  if (!t.ok()) {
    JTREE_FUZZ_CHECK(fuzz::is_refusal(t.status()), t.status().to_string());
    return 0;
  }
  check_same_tree(*opened, *fused, open_summary, summary);
  auto fused_bytes = format::encode_header(*fused, "fuzz");
  auto chunks = format::validate_leaves(*t, limits);
  JTREE_FUZZ_CHECK(chunks.ok() && summary.chunks == *chunks, "decode_tree's chunk count differs");
  auto again = format::encode_header(*t, "fuzz");
  JTREE_FUZZ_CHECK(fused_bytes.ok() && again.ok() && *fused_bytes == *again,
                   "decode_tree decodes another tree than the three steps");
  JTREE_FUZZ_CHECK(again.ok(), again.status().to_string());
  auto t2 = decode_and_check(*again, limits);
  JTREE_FUZZ_CHECK(t2.ok(), "re-encoded header refused: " + t2.status().to_string());
  auto third = format::encode_header(*t2, "fuzz");
  JTREE_FUZZ_CHECK(third.ok() && *third == *again, "header encoding is not stable");
  return 0;
}
