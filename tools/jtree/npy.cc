#include "npy.h"

#include <cstring>
#include <fstream>
#include <vector>

namespace jtree::cli {

std::string npy_descr(DType dtype, bool* exact) {
  *exact = true;
  switch (dtype) {
    case DType::kBool: return "|b1";
    case DType::kInt8: return "|i1";
    case DType::kInt16: return "<i2";
    case DType::kInt32: return "<i4";
    case DType::kInt64: return "<i8";
    case DType::kUInt8: return "|u1";
    case DType::kUInt16: return "<u2";
    case DType::kUInt32: return "<u4";
    case DType::kUInt64: return "<u8";
    case DType::kFloat16: return "<f2";
    case DType::kFloat32: return "<f4";
    case DType::kFloat64: return "<f8";
    case DType::kComplex64: return "<c8";
    case DType::kComplex128: return "<c16";
    case DType::kInt4: return "|i1";
    case DType::kUInt4: return "|u1";
    default:
      *exact = false;
      return "|V" + std::to_string(dtype_info(dtype)->item_size);
  }
}

void npy_widen4(DType dtype, std::span<std::byte> data) {
  if (dtype != DType::kInt4) return;
  for (auto& b : data) {
    b = std::byte(static_cast<uint8_t>(static_cast<int8_t>(static_cast<uint8_t>(b) << 4) >> 4));
  }
}

std::string npy_header(DType dtype, const Shape& shape) {
  bool exact;
  std::string header = "{'descr': '" + npy_descr(dtype, &exact) +
                       "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    header += std::to_string(shape[i]);
    header += shape.size() == 1 ? "," : (i + 1 < shape.size() ? ", " : "");
  }
  header += "), }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of
  // 64 and ended by '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  const uint16_t len = static_cast<uint16_t>(header.size());
  std::string out = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  return out + header;
}

Status write_npy(const std::string& path, DType dtype, const Shape& shape,
                 std::span<const std::byte> data) {
  const std::string head = npy_header(dtype, shape);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::io_error(path + ": cannot create: " + std::strerror(errno));
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  std::vector<std::byte> widened;
  if (dtype == DType::kInt4) {  // int8 values, not the library's nibbles
    widened.assign(data.begin(), data.end());
    npy_widen4(dtype, widened);
    data = widened;
  }
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return Status::io_error(path + ": write failed: " + std::strerror(errno));
  return Status::success();
}

}  // namespace jtree::cli
