// Fuzz target: the fixed-size structures — preamble, footer and commit slots. Whatever
// decodes must encode back to the same bytes (no field ignored, no reserved byte accepted).
//
// The payload's first 128 bytes are a preamble, its last 128 bytes a footer.
#include "fuzz_util.h"

using namespace jtree;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> b(reinterpret_cast<const std::byte*>(data), size);
  auto pre = format::decode_preamble(b);
  if (pre.ok()) {
    JTREE_FUZZ_CHECK(b.size() >= format::kPreambleSize, "short preamble accepted");
    auto enc = format::encode_preamble(*pre);
    // The slots are not part of the preamble's hash: compare the rest.
    JTREE_FUZZ_CHECK(std::memcmp(enc.data(), b.data(), 64) == 0, "preamble does not round-trip");
  } else {
    JTREE_FUZZ_CHECK(fuzz::is_refusal(pre.status()), pre.status().to_string());
  }
  if (b.size() >= format::kPreambleSize) {
    for (const format::CommitSlot& s : format::valid_slots(b.first(format::kPreambleSize))) {
      auto enc = format::encode_slot(s);
      const bool in_a = std::memcmp(enc.data(), b.data() + format::kSlotOffset[0], 32) == 0;
      const bool in_b = std::memcmp(enc.data(), b.data() + format::kSlotOffset[1], 32) == 0;
      JTREE_FUZZ_CHECK(in_a || in_b, "slot does not round-trip");
    }
  }
  if (b.size() >= format::kFooterSize) {
    const auto tail = b.last(format::kFooterSize);
    auto foot = format::decode_footer(tail);
    if (foot.ok()) {
      auto enc = format::encode_footer(*foot);
      JTREE_FUZZ_CHECK(std::memcmp(enc.data(), tail.data(), format::kFooterSize) == 0,
                       "footer does not round-trip");
    } else {
      JTREE_FUZZ_CHECK(fuzz::is_refusal(foot.status()), foot.status().to_string());
    }
  }
  return 0;
}
