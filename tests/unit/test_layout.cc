// Preamble, footer and commit slots: exact layout, checks, and rejection of damage.
#include <cstring>

#include <doctest/doctest.h>

#include "format/layout.h"
#include "util/endian.h"

using namespace jtree;
using namespace jtree::format;

TEST_CASE("preamble round trip and exact layout") {
  Preamble p;
  p.header_size = 1234;
  p.header_hash = 0x1122334455667788ull;
  auto b = encode_preamble(p);
  CHECK(std::memcmp(b.data(), "\x89JTREE\r\n", 8) == 0);
  CHECK(load_le<uint16_t>(b.data() + 8) == kFormatVersion);  // writer version
  CHECK(load_le<uint64_t>(b.data() + 32) == 128);            // header offset
  CHECK(load_le<uint64_t>(b.data() + 40) == 1234);
  for (size_t i = 64; i < 128; ++i) CHECK(b[i] == std::byte{0});  // empty slots
  auto d = decode_preamble(b);
  REQUIRE(d.ok());
  CHECK(d->header_size == 1234);
  CHECK(d->header_hash == p.header_hash);
}

TEST_CASE("preamble damage is Corruption, every byte of the hashed part") {
  auto good = encode_preamble(Preamble{});
  for (size_t i = 0; i < 64; ++i) {
    auto b = good;
    b[i] ^= std::byte{0x40};
    auto d = decode_preamble(b);
    CHECK_FALSE(d.ok());
    CHECK(d.status().code() == StatusCode::kCorruption);
  }
  CHECK(decode_preamble(std::span(good).first(100)).status().is_corruption());
  auto b = good;
  b[0] = std::byte{'P'};
  CHECK(decode_preamble(b).status().message().find("not a jtree file") != std::string::npos);
}

TEST_CASE("footer round trip, damage and versions") {
  Footer f;
  f.index_offset = 4096;
  f.index_size = 77;
  f.index_hash = 5;
  f.header_offset = 128;
  f.header_size = 900;
  f.header_hash = 6;
  f.generation = 3;
  f.prev_footer_offset = 2000;
  auto b = encode_footer(f);
  CHECK(std::memcmp(b.data() + 120, "\n\rEERTJ\x89", 8) == 0);
  auto d = decode_footer(b);
  REQUIRE(d.ok());
  CHECK(d->index_offset == 4096);
  CHECK(d->generation == 3);
  CHECK(d->prev_footer_offset == 2000);
  for (size_t i = 0; i < 128; ++i) {
    auto c = b;
    c[i] ^= std::byte{1};
    CHECK_FALSE(decode_footer(c).ok());
  }
  // A newer file version is NotSupported, with a message saying what to do.
  Footer newer = f;
  newer.version.writer_version = 9;
  newer.version.min_read_version = 9;
  auto n = decode_footer(encode_footer(newer));
  CHECK(n.status().is_not_supported());
  CHECK(n.status().message().find("upgrade jtree") != std::string::npos);
  // Unknown required feature: refuse. Unknown optional feature: ignore.
  Footer req = f;
  req.version.required_features = 1ull << 7;
  CHECK(decode_footer(encode_footer(req)).status().is_not_supported());
  Footer opt = f;
  opt.version.optional_features = 1ull << 7;
  CHECK(decode_footer(encode_footer(opt)).ok());
}

TEST_CASE("commit slots: empty, valid, torn, newest wins") {
  auto pre = encode_preamble(Preamble{});
  CHECK_FALSE(newest_slot(pre).has_value());
  auto a = encode_slot({4, 1000});
  auto b = encode_slot({5, 2000});
  std::memcpy(pre.data() + kSlotOffset[0], a.data(), kSlotSize);
  std::memcpy(pre.data() + kSlotOffset[1], b.data(), kSlotSize);
  auto s = newest_slot(pre);
  REQUIRE(s.has_value());
  CHECK(s->generation == 5);
  CHECK(s->footer_offset == 2000);
  pre[kSlotOffset[1] + 3] ^= std::byte{1};  // a torn write of the newer slot
  s = newest_slot(pre);
  REQUIRE(s.has_value());
  CHECK(s->generation == 4);
  // Slots are outside the preamble's hash: the preamble stays valid.
  CHECK(decode_preamble(pre).ok());
}

TEST_CASE("the checkpoint head copy's placement follows section 11.1") {
  // Segment header ends at 1000; the copy (preamble + header) is 640 bytes; data at 2048.
  CHECK(check_head_placement(1024, 640, 1000, 2048).ok());
  CHECK(check_head_placement(1408, 640, 1000, 2048).ok());   // ends exactly at the data
  CHECK(check_head_placement(1000, 640, 1000, 2048).is_corruption());  // not 64-aligned
  CHECK(check_head_placement(960, 640, 1000, 2048).is_corruption());   // overlaps own header
  CHECK(check_head_placement(1472, 640, 1000, 2048).is_corruption());  // runs into the data
  CHECK(check_head_placement(1024, 640, 1000, 2080).is_corruption());  // data - head not a multiple of 64
  CHECK(check_head_placement(1024, 640, 1000, 0).is_corruption());     // no data offset
  // Values that would overflow a naive end computation.
  CHECK(check_head_placement(UINT64_MAX - 63, 640, 1000, 2048).is_corruption());
  CHECK(check_head_placement(1024, UINT64_MAX, 1000, 2048).is_corruption());
  const Status st = check_head_placement(1472, 640, 1000, 2048);
  CHECK(st.message().find("1472") != std::string::npos);
  CHECK(st.message().find("2048") != std::string::npos);
}
