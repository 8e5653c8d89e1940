// An out-of-tree C++ program against the installed jtree (tests/install/test_consumers.sh):
//   read_leaf_cpp FILE KEY_PATH OUT     writes the leaf's bytes (as in memory) to OUT.
#include <cstdio>
#include <span>
#include <vector>

#include <jtree/jtree.h>

int main(int argc, char** argv) {
  if (argc != 4) return std::fprintf(stderr, "usage: %s FILE KEY_PATH OUT\n", argv[0]), 2;
  auto reader = jtree::Reader::open(argv[1]);
  if (!reader.ok()) return std::fprintf(stderr, "%s\n", reader.status().to_string().c_str()), 1;
  const jtree::Reader& r = **reader;
  auto leaf = r.find_leaf(argv[2]);
  if (!leaf.ok()) return std::fprintf(stderr, "%s\n", leaf.status().to_string().c_str()), 1;
  std::vector<std::byte> buf(r.tree().leaves[*leaf].memory_bytes());
  jtree::Status st = r.read(*leaf, buf);
  if (!st.ok()) return std::fprintf(stderr, "%s\n", st.to_string().c_str()), 1;
  std::FILE* out = std::fopen(argv[3], "wb");
  if (!out || std::fwrite(buf.data(), 1, buf.size(), out) != buf.size() || std::fclose(out) != 0)
    return std::perror(argv[3]), 1;
  std::printf("%s: %s %zu bytes (jtree %s)\n", argv[1], argv[2], buf.size(),
              std::string(jtree::version_string()).c_str());
  return 0;
}
