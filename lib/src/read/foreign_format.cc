#include "read/foreign_format.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "jtree/io.h"
#include "util/endian.h"

namespace jtree {
namespace {

std::string_view as_text(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// safetensors: the header's length (8 bytes, little-endian), then the JSON header, '{' first;
// the length must fit in the file.
bool is_safetensors(std::string_view head, uint64_t size) {
  if (head.size() < 9 || head[8] != '{' || size < 10) return false;
  const uint64_t n = load_le<uint64_t>(reinterpret_cast<const std::byte*>(head.data()));
  return n >= 2 && n <= size - 8;
}

// The name of a zip archive's first member (its local file header: the name's length at
// offset 26, the name at 30), or "" when the head does not hold it.
std::string_view first_zip_member(std::string_view head) {
  if (head.size() < 30) return {};
  const size_t len = load_le<uint16_t>(reinterpret_cast<const std::byte*>(head.data()) + 26);
  return head.size() < 30 + len ? std::string_view() : head.substr(30, len);
}

// A zip archive: PyTorch's (torch.save writes "<name>/data.pkl", named in the first local
// header and in the central directory at the end), NumPy's .npz (members "<key>.npy"), or
// another.
ForeignFormat zip_format(std::string_view head, std::string_view tail) {
  const std::string_view first = first_zip_member(head);
  if (first == "data.pkl" || ends_with(first, "/data.pkl") ||
      head.find("/data.pkl") != std::string_view::npos ||
      tail.find("/data.pkl") != std::string_view::npos) {
    return {"a PyTorch checkpoint (torch.save's zip format)", ""};
  }
  if (ends_with(first, ".npy")) return {"a NumPy .npz archive", ""};
  return {"a zip archive", std::nullopt};
}

// A pickle (protocol 2 to 5: 0x80 then the protocol): PyTorch's legacy format starts with its
// pickled magic number; other pickles may be PyTorch checkpoints too (or anything else).
ForeignFormat pickle_format(std::string_view head) {
  static constexpr std::string_view kTorchLegacy(
      "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14);
  if (starts_with(head, kTorchLegacy)) return {"a PyTorch checkpoint (legacy format)", ""};
  return {"a Python pickle (a PyTorch checkpoint?)", "--from torch"};
}

// `s` as one shell word: as it is when it holds only characters no shell treats specially,
// else in single quotes.
std::string shell_word(std::string_view s) {
  const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_./:@%+=,-", c) != nullptr;
  });
  if (plain) return std::string(s);
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The destination the hint proposes: the source's name with its format's extension replaced
// by .jtree ("model.safetensors" -> "model.jtree", "ckpt/" -> "ckpt.jtree").
std::string jtree_name_for(std::string_view src) {
  while (src.size() > 1 && src.back() == '/') src.remove_suffix(1);
  static constexpr std::array<std::string_view, 11> kSuffixes = {
      ".safetensors.index.json", ".safetensors", ".gguf", ".npz", ".npy", ".pt",
      ".pth", ".bin", ".ckpt", ".pkl", ".pickle"};
  for (std::string_view suffix : kSuffixes) {
    if (ends_with(src, suffix) && src.size() > suffix.size()) {
      src.remove_suffix(suffix.size());
      break;
    }
  }
  return std::string(src) + ".jtree";
}

}  // namespace

std::optional<ForeignFormat> identify_foreign_file(std::span<const std::byte> head_bytes,
                                                   std::span<const std::byte> tail_bytes,
                                                   uint64_t size) {
  const std::string_view head = as_text(head_bytes), tail = as_text(tail_bytes);
  if (starts_with(head, "GGUF")) return ForeignFormat{"a GGUF file", ""};
  if (starts_with(head, "\x93NUMPY")) return ForeignFormat{"a NumPy .npy file", ""};
  if (starts_with(head, "PK\x03\x04") || starts_with(head, "PK\x05\x06")) {
    return zip_format(head, tail);
  }
  if (head.size() >= 2 && head[0] == '\x80' && head[1] >= 2 && head[1] <= 5) {
    return pickle_format(head);
  }
  if (is_safetensors(head, size)) return ForeignFormat{"a safetensors checkpoint", ""};
  return std::nullopt;
}

std::optional<ForeignFormat> identify_foreign_directory(const std::string& path) {
  // The names that say what a checkpoint directory is, in the order they decide it.
  std::error_code ec;
  std::filesystem::directory_iterator it(path, ec);
  if (ec) return std::nullopt;
  std::string index, safetensors, orbax, pytree;
  size_t seen = 0;
  // (A bound on the listing: a directory of a million files is not a checkpoint to name.)
  for (; it != std::filesystem::directory_iterator() && seen < 100000; it.increment(ec), ++seen) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (ends_with(name, ".safetensors.index.json")) index = name;
    else if (ends_with(name, ".safetensors") && safetensors.empty()) safetensors = name;
    else if (name == "_CHECKPOINT_METADATA" || name == "_METADATA" || name == "manifest.ocdbt") {
      orbax = name;
    } else if (name == "pytreedef.json") {
      pytree = name;
    }
  }
  if (!index.empty()) {
    return ForeignFormat{"a Hugging Face safetensors checkpoint (" + index + ")", ""};
  }
  if (!safetensors.empty()) {
    return ForeignFormat{"a safetensors checkpoint (" + safetensors + ")", ""};
  }
  if (!orbax.empty()) return ForeignFormat{"an orbax checkpoint (" + orbax + ")", ""};
  if (!pytree.empty()) return ForeignFormat{"a JAX pytree_serialization checkpoint", ""};
  return std::nullopt;
}

std::string foreign_message(std::string_view name, const ForeignFormat& format) {
  std::string msg = std::string(name) + ": " + format.what + ", not a jtree file";
  if (!format.convert_flags) return msg;
  const std::string flags = format.convert_flags->empty() ? "" : *format.convert_flags + " ";
  if (std::string local; is_local_path(name, &local)) {
    return msg + ": convert it with `jtree convert " + flags + shell_word(local) + " " +
           shell_word(jtree_name_for(local)) + "`";
  }
  // A URL: `jtree convert` reads local files; the hint names a copy by its base name.
  std::string_view base = name.substr(0, name.find_first_of("?#"));
  while (base.size() > 1 && base.back() == '/') base.remove_suffix(1);
  base = base.substr(base.rfind('/') + 1);
  return msg + ": convert a local copy with `jtree convert " + flags + shell_word(base) + " " +
         shell_word(jtree_name_for(base)) + "`";
}

Status directory_error(std::string_view name, const std::string& local_path) {
  if (auto format = identify_foreign_directory(local_path)) {
    ForeignFormat f = *format;
    f.what = "a directory holding " + f.what;
    return Status::invalid_argument(foreign_message(name, f));
  }
  return Status::invalid_argument(std::string(name) + ": a directory, not a jtree file");
}

}  // namespace jtree
