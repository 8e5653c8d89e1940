// Byte-plane shuffle and float rotation: exact layouts, agreement of the vector paths with a
// naive reference (tails included), round trips.
//
// The vector path taken is the machine's best (AVX2 where present); run the binary with
// JTREE_CODEC_NO_AVX2=1 to exercise the SSE2 kernels instead.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "codec/byte_planes.h"

namespace {

using jtree::codec::rotate_left_1;
using jtree::codec::rotate_right_1;
using jtree::codec::shuffle;
using jtree::codec::unshuffle;

std::vector<std::byte> bytes(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v) out.push_back(std::byte(static_cast<uint8_t>(x)));
  return out;
}

std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = std::byte(static_cast<uint8_t>(rng()));
  return out;
}

std::vector<std::byte> naive_shuffle(const std::vector<std::byte>& src, size_t w) {
  const size_t n = src.size() / w;
  std::vector<std::byte> dst(src.size());
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < w; ++k) dst[k * n + i] = src[i * w + k];
  }
  return dst;
}

std::vector<std::byte> naive_unshuffle(const std::vector<std::byte>& src, size_t w) {
  const size_t n = src.size() / w;
  std::vector<std::byte> dst(src.size());
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < w; ++k) dst[i * w + k] = src[k * n + i];
  }
  return dst;
}

template <typename U>
U rotl_word(U x) {
  return static_cast<U>((x << 1) | (x >> (sizeof(U) * 8 - 1)));
}

template <typename U>
std::vector<std::byte> words(std::initializer_list<U> v) {
  std::vector<std::byte> out(v.size() * sizeof(U));
  size_t i = 0;
  for (U x : v) std::memcpy(out.data() + sizeof(U) * i++, &x, sizeof(U));
  return out;
}

template <typename U>
U word_at(const std::vector<std::byte>& b, size_t i) {
  U x;
  std::memcpy(&x, b.data() + i * sizeof(U), sizeof(U));
  return x;
}

}  // namespace

TEST_CASE("shuffle: exact layout for width 2") {
  const auto src = bytes({0x01, 0x02, 0x11, 0x12, 0x21, 0x22});
  std::vector<std::byte> dst(src.size());
  shuffle(src, dst, 2);
  CHECK(dst == bytes({0x01, 0x11, 0x21, 0x02, 0x12, 0x22}));
  std::vector<std::byte> back(src.size());
  unshuffle(dst, back, 2);
  CHECK(back == src);
}

TEST_CASE("shuffle: exact layout for width 4") {
  const auto src = bytes({0xA0, 0xA1, 0xA2, 0xA3, 0xB0, 0xB1, 0xB2, 0xB3, 0xC0, 0xC1, 0xC2, 0xC3});
  std::vector<std::byte> dst(src.size());
  shuffle(src, dst, 4);
  CHECK(dst == bytes({0xA0, 0xB0, 0xC0, 0xA1, 0xB1, 0xC1, 0xA2, 0xB2, 0xC2, 0xA3, 0xB3, 0xC3}));
}

TEST_CASE("shuffle: exact layout across a full vector block (width 2, 40 elements)") {
  // 40 elements: one or two whole vector blocks plus a scalar tail.
  std::vector<std::byte> src(80);
  for (size_t i = 0; i < 40; ++i) {
    src[2 * i] = std::byte(static_cast<uint8_t>(i));
    src[2 * i + 1] = std::byte(static_cast<uint8_t>(0x80 + i));
  }
  std::vector<std::byte> dst(80);
  shuffle(src, dst, 2);
  for (size_t i = 0; i < 40; ++i) {
    CHECK(dst[i] == std::byte(static_cast<uint8_t>(i)));
    CHECK(dst[40 + i] == std::byte(static_cast<uint8_t>(0x80 + i)));
  }
}

TEST_CASE("shuffle/unshuffle agree with the naive reference and round trip") {
  const size_t widths[] = {1, 2, 3, 4, 8, 16};
  const size_t counts[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 65537};
  for (size_t w : widths) {
    for (size_t n : counts) {
      CAPTURE(w);
      CAPTURE(n);
      const auto src = random_bytes(n * w, 1000 * w + n);
      std::vector<std::byte> dst(src.size()), back(src.size());
      shuffle(src, dst, w);
      CHECK(dst == naive_shuffle(src, w));
      unshuffle(dst, back, w);
      CHECK(back == src);
      // unshuffle on its own (not just as the inverse of our shuffle)
      unshuffle(src, back, w);
      CHECK(back == naive_unshuffle(src, w));
    }
  }
}

TEST_CASE("shuffle/unshuffle work at unaligned addresses") {
  for (size_t w : {2, 4, 8, 16}) {
    CAPTURE(w);
    const size_t n = 1003;
    auto buf = random_bytes(n * w + 3, 77 + w);
    std::vector<std::byte> src(buf.begin() + 3, buf.end());
    std::vector<std::byte> out(n * w + 5), back(n * w + 1);
    shuffle(std::span<const std::byte>(buf).subspan(3), std::span<std::byte>(out).subspan(5), w);
    CHECK(std::vector<std::byte>(out.begin() + 5, out.end()) == naive_shuffle(src, w));
    unshuffle(std::span<const std::byte>(out).subspan(5), std::span<std::byte>(back).subspan(1),
              w);
    CHECK(std::vector<std::byte>(back.begin() + 1, back.end()) == src);
  }
}

TEST_CASE("rotate: exact values") {
  auto a = words<uint16_t>({0x8001, 0x0001, 0x4000});
  rotate_left_1(a, 2);
  CHECK(word_at<uint16_t>(a, 0) == 0x0003);
  CHECK(word_at<uint16_t>(a, 1) == 0x0002);
  CHECK(word_at<uint16_t>(a, 2) == 0x8000);
  rotate_right_1(a, 2);
  CHECK(word_at<uint16_t>(a, 0) == 0x8001);

  auto b = words<uint32_t>({0x3F800000u, 0xBF800000u});  // 1.0f, -1.0f
  rotate_left_1(b, 4);
  CHECK(word_at<uint32_t>(b, 0) == 0x7F000000u);
  CHECK(word_at<uint32_t>(b, 1) == 0x7F000001u);  // the sign lands in bit 0

  auto c = words<uint64_t>({0x8000000000000001ull, 0x3FF0000000000000ull});  // ..., 1.0
  rotate_left_1(c, 8);
  CHECK(word_at<uint64_t>(c, 0) == 0x3ull);
  CHECK(word_at<uint64_t>(c, 1) == 0x7FE0000000000000ull);
  rotate_right_1(c, 8);
  CHECK(word_at<uint64_t>(c, 0) == 0x8000000000000001ull);
  CHECK(word_at<uint64_t>(c, 1) == 0x3FF0000000000000ull);
}

template <typename U>
void check_rotate_matches_reference(size_t count, size_t offset) {
  CAPTURE(sizeof(U));
  CAPTURE(count);
  CAPTURE(offset);
  auto buf = random_bytes(count * sizeof(U) + offset, 5 * count + offset + sizeof(U));
  const std::vector<std::byte> orig(buf.begin() + offset, buf.end());
  std::span<std::byte> data = std::span<std::byte>(buf).subspan(offset);
  rotate_left_1(data, sizeof(U));
  bool all_match = true;
  for (size_t i = 0; i < count; ++i) {
    U x, y;
    std::memcpy(&x, orig.data() + i * sizeof(U), sizeof(U));
    std::memcpy(&y, data.data() + i * sizeof(U), sizeof(U));
    all_match = all_match && y == rotl_word(x);
  }
  CHECK(all_match);
  rotate_right_1(data, sizeof(U));
  CHECK(std::vector<std::byte>(data.begin(), data.end()) == orig);
}

TEST_CASE("rotate: vector paths agree with the reference, tails and round trips") {
  for (size_t count : {0, 1, 3, 7, 8, 9, 31, 32, 33, 64, 65, 1000, 4099}) {
    for (size_t offset : {0, 1}) {
      check_rotate_matches_reference<uint16_t>(count, offset);
      check_rotate_matches_reference<uint32_t>(count, offset);
      check_rotate_matches_reference<uint64_t>(count, offset);
    }
  }
}
