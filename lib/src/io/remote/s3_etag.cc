#include "io/remote/s3_etag.h"

#include <openssl/evp.h>

#include "io/remote/sigv4.h"

namespace jtree::remote {
namespace {

std::string md5_raw(const void* data, size_t size) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, size, out, &len, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string_view unquoted(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    return etag.substr(1, etag.size() - 2);
  }
  return etag;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The 16 bytes of an MD5 written as 32 hex digits; nullopt for anything else.
std::optional<std::string> md5_from_hex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  std::string raw(16, '\0');
  for (size_t i = 0; i < 16; ++i) {
    const int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    raw[i] = static_cast<char>(hi * 16 + lo);
  }
  return raw;
}

}  // namespace

std::string put_object_etag(std::span<const std::byte> body) {
  return "\"" + hex(md5_raw(body.data(), body.size())) + "\"";
}

std::optional<std::string> multipart_etag(const std::vector<UploadedPart>& parts) {
  std::string digests;
  digests.reserve(parts.size() * 16);
  for (const UploadedPart& p : parts) {
    auto raw = md5_from_hex(unquoted(p.etag));
    if (!raw) return std::nullopt;
    digests += *raw;
  }
  return "\"" + hex(md5_raw(digests.data(), digests.size())) + "-" +
         std::to_string(parts.size()) + "\"";
}

bool same_etag(std::string_view a, std::string_view b) { return unquoted(a) == unquoted(b); }

}  // namespace jtree::remote
