// Files and directories of other formats opened as jtree files (issue 49): each is named, with
// the `jtree convert` command that converts it, from tiny hand-made files; the status codes
// stay those of any file that is not a jtree file (Corruption; InvalidArgument for a directory).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "read/foreign_format.h"
#include "test_util.h"

using namespace jtree;
using jtree::testing::TempDir;

namespace {

// `text` as bytes, padded with `pad` spaces (so that a file passes the opener's minimum size
// or stays under it).
std::vector<std::byte> bytes_of(std::string_view text, size_t pad = 0) {
  std::vector<std::byte> b(text.size() + pad, std::byte{' '});
  std::memcpy(b.data(), text.data(), text.size());
  return b;
}

// A zip archive's first local file header naming `member` (what the opener looks at), then
// `rest` (later members, the central directory: only their names matter here).
std::string zip_with(std::string_view member, std::string_view rest = "") {
  std::string z = "PK\x03\x04";
  z += std::string(22, '\0');  // version, flags, method, time, date, crc, sizes
  z += static_cast<char>(member.size() & 0xff);
  z += static_cast<char>(member.size() >> 8);
  z += std::string(2, '\0');  // no extra field
  z += member;
  return z + std::string(rest);
}

// safetensors: the JSON header's length (8 bytes, little-endian), then the header.
std::string safetensors_with(std::string_view json) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return s + std::string(json);
}

// Opens `path` and returns the refusal.
Status refusal(const std::string& path) {
  auto r = Reader::open(path);
  REQUIRE_FALSE(r.ok());
  return r.status();
}

}  // namespace

TEST_CASE("foreign files are named, with the command that converts them") {
  TempDir dir;
  struct Case {
    const char* file;
    std::string bytes;
    size_t pad;
    const char* what;
    const char* dst;  // the hint's destination; null: no hint
    const char* flags = "";
  };
  const std::string legacy_torch("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14);
  const Case cases[] = {
      {"model.safetensors",
       safetensors_with(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})") + "abcd", 0,
       "a safetensors checkpoint", "model.jtree"},
      {"padded.safetensors", safetensors_with("{\"__metadata__\":{}}"), 400,
       "a safetensors checkpoint", "padded.jtree"},
      {"model.gguf", std::string("GGUF\x03\0\0\0", 8), 300, "a GGUF file", "model.jtree"},
      {"x.npy", std::string("\x93NUMPY\x01\x00", 8) + "{'descr': '<f4'}", 0, "a NumPy .npy file",
       "x.jtree"},
      {"arrays.npz", zip_with("w.npy"), 300, "a NumPy .npz archive", "arrays.jtree"},
      {"model.pt", zip_with("archive/data.pkl"), 300,
       "a PyTorch checkpoint (torch.save's zip format)", "model.jtree"},
      // data.pkl not first: found among the names later in the file (the central directory).
      {"pytorch_model.bin", zip_with("archive/.format_version", "1 ... archive/data.pkl ..."), 0,
       "a PyTorch checkpoint (torch.save's zip format)", "pytorch_model.jtree"},
      {"old.pt", legacy_torch, 300, "a PyTorch checkpoint (legacy format)", "old.jtree"},
      {"state.pkl", std::string("\x80\x04\x95", 3), 10, "a Python pickle (a PyTorch checkpoint?)",
       "state.jtree", "--from torch "},
      {"notes.zip", zip_with("readme.txt"), 300, "a zip archive", nullptr},
  };
  for (const Case& c : cases) {
    CAPTURE(c.file);
    const std::string path = dir.file(c.file);
    jtree::testing::write_file(path, bytes_of(c.bytes, c.pad));
    const Status st = refusal(path);
    CHECK(st.is_corruption());
    std::string want = path + ": " + c.what + ", not a jtree file";
    if (c.dst != nullptr) {
      want += std::string(": convert it with `jtree convert ") + c.flags + path + " " +
              dir.file(c.dst) + "`";
    }
    CHECK(st.message() == want);
  }
}

TEST_CASE("files of no known format keep their messages") {
  TempDir dir;
  const std::string text = dir.file("notes.txt"), tiny = dir.file("tiny.bin");
  jtree::testing::write_file(text, bytes_of("hello, this is not a jtree file", 400));
  jtree::testing::write_file(tiny, bytes_of("hi"));
  CHECK(refusal(text).message() == text + ": not a jtree file (bad magic at offset 0)");
  CHECK(refusal(tiny).message() == tiny + ": file of 2 bytes is too short to be a jtree file");
  // '{' at offset 8 after a length past the end of the file is not safetensors.
  const std::string fake = dir.file("fake.bin");
  jtree::testing::write_file(fake, bytes_of(safetensors_with("{}").replace(7, 1, "\x01"), 300));
  CHECK(refusal(fake).message() == fake + ": not a jtree file (bad magic at offset 0)");
}

TEST_CASE("directories say what they hold; InvalidArgument as before") {
  TempDir dir;
  auto make = [&](const std::string& sub, const std::vector<std::string>& files) {
    std::filesystem::create_directories(dir.path() / sub);
    for (const std::string& f : files) std::ofstream(dir.path() / sub / f) << "{}";
    return dir.file(sub);
  };
  const std::string hf = make("hf", {"config.json", "model-00001-of-00002.safetensors",
                                     "model.safetensors.index.json"});
  const std::string one = make("one", {"config.json", "model.safetensors"});
  const std::string orbax = make("step_100", {"_CHECKPOINT_METADATA"});
  const std::string ocdbt = make("ocdbt", {"manifest.ocdbt", "_sharding"});
  const std::string plain = make("plain", {"notes.txt"});
  struct Case {
    std::string path, what;
  };
  const Case cases[] = {
      {hf, "a directory holding a Hugging Face safetensors checkpoint "
           "(model.safetensors.index.json)"},
      {hf + "/", "a directory holding a Hugging Face safetensors checkpoint "
                 "(model.safetensors.index.json)"},
      {one, "a directory holding a safetensors checkpoint (model.safetensors)"},
      {orbax, "a directory holding an orbax checkpoint (_CHECKPOINT_METADATA)"},
      {ocdbt, "a directory holding an orbax checkpoint (manifest.ocdbt)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.path);
    const Status st = refusal(c.path);
    CHECK(st.is_invalid_argument());
    std::string stem = c.path;
    if (stem.back() == '/') stem.pop_back();
    CHECK(st.message() == c.path + ": " + c.what + ", not a jtree file: convert it with `jtree " +
                              "convert " + c.path + " " + stem + ".jtree`");
  }
  const Status st = refusal(plain);
  CHECK(st.is_invalid_argument());
  CHECK(st.message() == plain + ": a directory, not a jtree file");
}

TEST_CASE("the hint: URLs name a local copy; unusual names are quoted for the shell") {
  const ForeignFormat st{"a safetensors checkpoint", ""};
  CHECK(foreign_message("https://host/m/model.safetensors?X-Amz-Signature=abc", st) ==
        "https://host/m/model.safetensors?X-Amz-Signature=abc: a safetensors checkpoint, not a "
        "jtree file: convert a local copy with `jtree convert model.safetensors model.jtree`");
  CHECK(foreign_message("s3://b/ckpt/model.safetensors.index.json", st) ==
        "s3://b/ckpt/model.safetensors.index.json: a safetensors checkpoint, not a jtree file: "
        "convert a local copy with `jtree convert model.safetensors.index.json model.jtree`");
  CHECK(foreign_message("my model's.safetensors", st) ==
        "my model's.safetensors: a safetensors checkpoint, not a jtree file: convert it with "
        "`jtree convert 'my model'\\''s.safetensors' 'my model'\\''s.jtree'`");
  CHECK(foreign_message("file:///data/w.gguf", ForeignFormat{"a GGUF file", ""}) ==
        "file:///data/w.gguf: a GGUF file, not a jtree file: convert it with "
        "`jtree convert /data/w.gguf /data/w.jtree`");
  CHECK(foreign_message("x.zip", ForeignFormat{"a zip archive", std::nullopt}) ==
        "x.zip: a zip archive, not a jtree file");
  // A real jtree file is not foreign, whatever follows its magic.
  const std::string jtree_head("\x89JTREE\r\n", 8);
  CHECK_FALSE(identify_foreign_file(std::as_bytes(std::span(jtree_head)), {}, 8).has_value());
}
