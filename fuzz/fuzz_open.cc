// Fuzz target: opening a file (preamble, footer, commit slots, header, index) from bytes.
// Every input must open, or be refused with a Corruption / NotSupported / ResourceExhausted
// status naming the source; an opened file's tree must be navigable.
//
// Options (the input's last 8 bytes):
//   [0] bit 0: repair the hashes first (reach the semantic checks, as a hostile writer would)
//   [1] head read bytes, [2] tail read bytes (selectors: exercise the third-read path)
//   [3] parser limits (fuzz_util.h: limits_for)
#include "fuzz_util.h"

using namespace jtree;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Split<8> in(data, size);
  std::vector<std::byte> file(in.payload.begin(), in.payload.end());
  if (in.opt[0] & 1) fuzz::rehash(file, false);
  constexpr uint64_t kReads[4] = {128, 300, 4096, 64 * 1024};
  OpenOptions oo;
  oo.head_read_bytes = kReads[in.opt[1] % 4];
  oo.tail_read_bytes = kReads[in.opt[2] % 4];
  oo.limits = fuzz::limits_for(in.opt[3]);
  auto r = Reader::open(memory_source(std::move(file), "fuzz.jtree"), oo);
  if (!r.ok()) {
    JTREE_FUZZ_CHECK(fuzz::is_refusal(r.status()) || r.status().is_io_error(),
                     r.status().to_string());
    JTREE_FUZZ_CHECK(r.status().message().find("fuzz.jtree") != std::string::npos,
                     "message does not name the file: " + r.status().message());
    return 0;
  }
  // What was accepted must be consistent: paths resolve back to their nodes, leaves map to
  // nodes, chunk entries resolve inside the file.
  const Reader& reader = **r;
  const Tree& t = reader.tree();
  for (uint32_t l = 0; l < t.leaves.size(); ++l) {
    const std::string path = t.leaf_path(l);
    auto found = t.find(path);
    JTREE_FUZZ_CHECK(found.ok(), path);
  }
  const FileInfo& info = reader.info();
  JTREE_FUZZ_CHECK(info.footer_offset + format::kFooterSize <= info.file_size, "footer");
  for (uint64_t i = 0; i < info.num_chunks; ++i) {
    const ChunkInfo c = reader.chunk(i);
    if (c.absent) continue;
    JTREE_FUZZ_CHECK(c.file_offset + c.stored_size <= info.footer_offset, "chunk range");
  }
  return 0;
}
