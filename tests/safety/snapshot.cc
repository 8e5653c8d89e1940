#include "snapshot.h"

#include <cstring>

namespace jtree::safety {

std::string leaf_spec(const Leaf& l) {
  std::string s = std::string(leaf_kind_name(l.kind)) + " flags=" + std::to_string(l.flags) +
                  " dtype=" + std::to_string(static_cast<int>(l.dtype)) +
                  " storage=" + std::to_string(static_cast<int>(l.storage)) +
                  " filter=" + std::to_string(static_cast<int>(l.filter)) +
                  " codec=" + std::to_string(static_cast<int>(l.codec)) +
                  " level=" + std::to_string(l.level) + " bool=" + std::to_string(l.bool_value) +
                  " int=" + std::to_string(l.int_value) + " big=" + l.big_int;
  char reals[64];
  std::memcpy(reals, &l.real, 8);
  std::memcpy(reals + 8, &l.imag, 8);
  s.append(" reals=").append(reals, 16);  // bit patterns: NaNs compare equal to themselves
  s += " shape=";
  for (uint64_t d : l.shape) s += std::to_string(d) + ",";
  s += " chunk=";
  for (uint64_t d : l.chunk_shape) s += std::to_string(d) + ",";
  s += " type=" + l.type_name;
  return s;
}

ReadOptions single_thread() {
  ReadOptions ro;
  ro.threads = 1;
  return ro;
}

Snapshot snapshot(const Reader& reader, const ReadOptions& ro) {
  Snapshot s;
  const Tree& t = reader.tree();
  for (const Node& n : t.nodes) {
    s.structure += std::to_string(static_cast<int>(n.kind)) + "|" +
                   std::to_string(static_cast<int>(n.key.kind)) + "|" + n.key.str + "|" +
                   std::to_string(n.key.i) + "|" + std::to_string(n.num_children) + "|" +
                   n.type_name + "|" + n.aux_data + "|" + std::to_string(n.leaf) + "\n";
  }
  for (const auto& [k, v] : t.metadata) s.structure += "meta " + k + "=" + v + "\n";
  s.generation = reader.info().generation;
  s.recovered = reader.info().recovered;
  for (uint32_t i = 0; i < t.leaves.size(); ++i) {
    const Leaf& l = t.leaves[i];
    LeafSnapshot ls;
    ls.spec = leaf_spec(l);
    ls.location = "inline=" + l.inline_data;
    if (l.storage == Storage::kChunked) {
      for (uint64_t k = 0; k < Tree::chunk_count(l); ++k) {
        const ChunkInfo c = reader.chunk(l.first_chunk + k);
        ls.location += " @" + std::to_string(c.file_offset) + "+" + std::to_string(c.stored_size) +
                       "/" + std::to_string(c.checksum) + "/" + std::to_string(c.seed) + "/" +
                       std::to_string(static_cast<int>(c.encoding)) + (c.absent ? "A" : "");
      }
    }
    if (l.is_payload() && l.memory_bytes() > kMaxSnapshotLeafBytes) {
      ls.status = Status::resource_exhausted("test: leaf of " + std::to_string(l.memory_bytes()) +
                                            " bytes not read");
    } else if (l.is_payload()) {
      std::string data(l.memory_bytes(), '\0');
      ls.status = reader.read(i, std::as_writable_bytes(std::span(data)), ro);
      if (ls.status.ok()) ls.data = std::move(data);
    }
    s.leaves.push_back(std::move(ls));
  }
  return s;
}

Snapshot snapshot(std::vector<std::byte> bytes, const std::string& name, const ReadOptions& ro) {
  OpenOptions oo;
  auto r = Reader::open(memory_source(std::move(bytes), name), oo);
  if (!r.ok()) {
    Snapshot s;
    s.status = r.status();
    return s;
  }
  return snapshot(**r, ro);
}

}  // namespace jtree::safety
