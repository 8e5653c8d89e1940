// Fuzz target: the header flatbuffer alone — verification, decoding, the tree's structure
// checks (Finalize) and the leaf spec checks (validate_leaves), without the hashes in the way.
// A header that passes is re-encoded: decoding the re-encoded bytes must accept them and give
// the same encoding again (no field is lost or invented on the way).
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
  if (!t.ok()) {
    JTREE_FUZZ_CHECK(fuzz::is_refusal(t.status()), t.status().ToString());
    return 0;
  }
  auto again = format::encode_header(*t, "fuzz");
  JTREE_FUZZ_CHECK(again.ok(), again.status().ToString());
  auto t2 = decode_and_check(*again, limits);
  JTREE_FUZZ_CHECK(t2.ok(), "re-encoded header refused: " + t2.status().ToString());
  auto third = format::encode_header(*t2, "fuzz");
  JTREE_FUZZ_CHECK(third.ok() && *third == *again, "header encoding is not stable");
  return 0;
}
