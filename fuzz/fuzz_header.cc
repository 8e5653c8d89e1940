// Fuzz target: the header flatbuffer alone — verification, decoding, the tree's structure
// checks (Finalize) and the leaf spec checks (validate_leaves), without the hashes in the way.
// A header that passes is re-encoded: decoding the re-encoded bytes must accept them and give
// the same encoding again (no field is lost or invented on the way). The fused decoder that
// Reader::Open uses (format::decode_tree) must agree with the three steps: the same status,
// and for an accepted header the same encoding and chunk count.
//
// Options (the input's last 2 bytes): [0] parser limits.
#include "format/header_codec.h"
#include "format/validate.h"
#include "fuzz_util.h"

using namespace jtree;

namespace {

Result<Tree> decode_and_check(std::span<const std::byte> bytes, const Limits& limits) {
  std::string writer;
  JTREE_ASSIGN_OR_RETURN(Tree t, format::decode_header(bytes, limits, &writer));
  Status st = t.Finalize(limits.max_depth);
  if (!st.ok()) return Status::Corruption("header: " + st.message());
  JTREE_RETURN_IF_ERROR(format::validate_leaves(t, limits).status());
  return t;
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
                       (t.ok() || fused.status().ToString() == t.status().ToString()),
                   "decode_tree says " + fused.status().ToString() + ", the three steps " +
                       t.status().ToString());
  if (!t.ok()) {
    JTREE_FUZZ_CHECK(fuzz::is_refusal(t.status()), t.status().ToString());
    return 0;
  }
  auto fused_bytes = format::encode_header(*fused, "fuzz");
  auto chunks = format::validate_leaves(*t, limits);
  JTREE_FUZZ_CHECK(chunks.ok() && summary.chunks == *chunks, "decode_tree's chunk count differs");
  auto again = format::encode_header(*t, "fuzz");
  JTREE_FUZZ_CHECK(fused_bytes.ok() && again.ok() && *fused_bytes == *again,
                   "decode_tree decodes another tree than the three steps");
  JTREE_FUZZ_CHECK(again.ok(), again.status().ToString());
  auto t2 = decode_and_check(*again, limits);
  JTREE_FUZZ_CHECK(t2.ok(), "re-encoded header refused: " + t2.status().ToString());
  auto third = format::encode_header(*t2, "fuzz");
  JTREE_FUZZ_CHECK(third.ok() && *third == *again, "header encoding is not stable");
  return 0;
}
