// Fuzz target: the write -> read round trip. The payload describes a tree (containers, keys,
// scalars, text, bytes, arrays of every dtype and rank, strided, byte-swapped and produced
// views, tied leaves, per-leaf codecs, filters and chunk shapes); the tail chooses the write
// options. The tree is saved into memory, opened, and everything must come back exactly:
// structure, keys, scalars, payloads whole and sliced; verify() must find nothing wrong.
//
// Options (the input's last 8 bytes): [0] codec, [1] zstd level, [2] target chunk bytes,
// [3] inline threshold, [4] alignment, [5] min gain, [6] threads, [7] slice seed.
#include <cmath>
#include <map>

#include "fuzz_util.h"

using namespace jtree;

namespace {

// The payload, consumed from the front; zeros once exhausted.
struct Cursor {
  std::span<const std::byte> p;
  size_t i = 0;
  uint8_t u8() { return i < p.size() ? static_cast<uint8_t>(p[i++]) : 0; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v |= static_cast<uint64_t>(u8()) << (8 * k);
    return v;
  }
  std::string bytes(size_t n) {
    std::string s(n, '\0');
    for (size_t k = 0; k < n; ++k) s[k] = static_cast<char>(u8() ^ static_cast<uint8_t>(k * 31));
    return s;
  }
};

// What the reader must give back for one leaf.
struct Expected {
  LeafKind kind = LeafKind::kArray;
  DType dtype = DType::kInvalid;
  Shape shape;
  std::vector<std::byte> memory;  // arrays: C-order, memory layout; text/bytes: the bytes
  int64_t i = 0;
  uint64_t real_bits = 0, imag_bits = 0;
  bool b = false;
};

// Memory-layout value the reader returns for element bytes the writer was given: 4-bit
// elements keep their low nibble, int4 included (as ml_dtypes holds them: issue 20 defect 5).
void normalize(DType dtype, std::byte* p) {
  if (is_4bit(dtype)) *p = static_cast<std::byte>(static_cast<uint8_t>(*p) & 0x0f);
}

struct Builder {
  Cursor c;
  TreeBuilder b;
  std::vector<std::unique_ptr<std::vector<std::byte>>> keep;  // arrays outlive the save
  std::vector<Expected> expected;                             // by leaf id
  std::vector<uint32_t> arrays;                               // leaf ids of arrays (for ties)
  int nodes = 0;

  void key_for(int kind, int child) {
    // kind: 0 keyless, 1 str keys, 2 int keys, 3 mixed
    if (kind == 1 || (kind == 3 && child % 2 == 0)) {
      b.key("k" + std::to_string(child) + (c.u8() % 8 == 0 ? "/x\\y" : ""));
    } else if (kind >= 2) {
      b.key(static_cast<int64_t>(child) * 7 - 3);
    }
  }

  void array() {
    Expected e;
    e.dtype = static_cast<DType>(1 + c.u8() % (kDTypeCodeEnd - 1));
    const size_t rank = c.u8() % 4;
    uint64_t elements = 1;
    for (size_t d = 0; d < rank; ++d) {
      const uint64_t extent = d == 0 ? c.u8() % 40 : c.u8() % 7;
      e.shape.push_back(extent);
      elements *= extent;
    }
    const size_t item = dtype_info(e.dtype)->item_size;
    e.memory.resize(elements * item);
    for (auto& x : e.memory) x = static_cast<std::byte>(c.u8());
    for (size_t k = 0; k < elements * item; k += item) {
      if (item == 1) normalize(e.dtype, &e.memory[k]);
    }
    LeafOptions o;
    const uint8_t how = c.u8();
    if (how & 1) o.codec = static_cast<Codec>((how >> 1) & 1);
    if (how & 4) o.filter = static_cast<Filter>((how >> 3) % 3);
    if (how & 32) o.level = static_cast<int8_t>(c.u8()) % 8;
    if (how & 64) {
      for (uint64_t extent : e.shape) o.chunk_shape.push_back(1 + c.u8() % (extent + 1));
    }
    if (o.filter && !o.chunk_shape.empty() && (how & 128)) o.target_chunk_bytes = 1 + c.u8();
    const uint8_t view = c.u8() % 4;
    auto data = std::make_unique<std::vector<std::byte>>(e.memory);
    if (view == 1 && rank >= 2 && elements > 0) {
      // Fortran order: the writer gathers through strides.
      std::vector<int64_t> strides(rank);
      int64_t s = static_cast<int64_t>(item);
      for (size_t d = 0; d < rank; ++d) {
        strides[d] = s;
        s *= static_cast<int64_t>(e.shape[d]);
      }
      Shape idx(rank, 0);
      for (uint64_t k = 0; k < elements; ++k) {
        int64_t off = 0;
        for (size_t d = 0; d < rank; ++d) off += static_cast<int64_t>(idx[d]) * strides[d];
        std::memcpy(data->data() + off, e.memory.data() + k * item, item);
        for (size_t d = rank; d-- > 0;) {
          if (++idx[d] < e.shape[d]) break;
          idx[d] = 0;
        }
      }
      b.array(e.dtype, e.shape, ArrayView{data->data(), strides}, o);
    } else if (view == 2 && item > 1 && e.dtype != DType::kComplex64 &&
               e.dtype != DType::kComplex128) {
      // Big-endian input: swapped while gathered.
      for (size_t k = 0; k < data->size(); k += item) {
        std::reverse(data->begin() + static_cast<ptrdiff_t>(k),
                     data->begin() + static_cast<ptrdiff_t>(k + item));
      }
      b.array(e.dtype, e.shape, ArrayView{data->data(), {}, true}, o);
    } else if (view == 3) {
      // A producer: fills any box from the C-order reference.
      const std::vector<std::byte>* ref = data.get();
      const Shape shape = e.shape;
      b.array(e.dtype, e.shape,
              FillFn([ref, shape, item](const Box& box, std::span<std::byte> dst) {
                const size_t r = shape.size();
                Shape idx = box.begin;
                const uint64_t n = box.num_elements();
                if (dst.size() != n * item) return Status::invalid_argument("fill: wrong size");
                for (uint64_t k = 0; k < n; ++k) {
                  uint64_t off = 0;
                  for (size_t d = 0; d < r; ++d) off = off * shape[d] + idx[d];
                  std::memcpy(dst.data() + k * item, ref->data() + off * item, item);
                  for (size_t d = r; d-- > 0;) {
                    if (++idx[d] < box.end[d]) break;
                    idx[d] = box.begin[d];
                  }
                }
                return Status::success();
              }),
              o);
    } else {
      b.array(e.dtype, e.shape, ArrayView{data->data()}, o);
    }
    keep.push_back(std::move(data));
    arrays.push_back(static_cast<uint32_t>(expected.size()));
    expected.push_back(std::move(e));
  }

  void scalar_or_text(uint8_t what) {
    Expected e;
    switch (what) {
      case 0:
        e.kind = LeafKind::kInt;
        e.i = static_cast<int64_t>(c.u64());
        b.int_value(e.i);
        break;
      case 1: {
        e.kind = LeafKind::kFloat;
        e.real_bits = c.u64();
        double v;
        std::memcpy(&v, &e.real_bits, 8);
        b.float_value(v);
        break;
      }
      case 2:
        e.kind = LeafKind::kBool;
        e.b = c.u8() & 1;
        b.bool_value(e.b);
        break;
      case 3: {
        e.kind = LeafKind::kComplex;
        e.real_bits = c.u64();
        e.imag_bits = c.u64();
        double re, im;
        std::memcpy(&re, &e.real_bits, 8);
        std::memcpy(&im, &e.imag_bits, 8);
        b.complex_value(re, im);
        break;
      }
      default: {
        e.kind = what == 4 ? LeafKind::kStr : LeafKind::kBytes;
        const size_t n = (c.u8() & 0x80) ? 4000 + c.u8() * 40 : c.u8() % 64;
        std::string s = c.bytes(n);
        e.memory.assign(reinterpret_cast<const std::byte*>(s.data()),
                        reinterpret_cast<const std::byte*>(s.data()) + s.size());
        if (what == 4) b.str(std::move(s));
        else b.bytes(std::move(s));
        break;
      }
    }
    expected.push_back(std::move(e));
  }

  void node(int depth) {
    ++nodes;
    const uint8_t k = c.u8() % 14;
    if (k <= 4 || nodes > 60) return array();
    if (k <= 10) return scalar_or_text(k - 5);
    if (k == 11) {
      b.none();
      return;
    }
    if (k == 13) {
      if (arrays.empty()) {
        b.none();
        return;
      }
      b.tied(arrays[c.u8() % arrays.size()]);
      return;
    }
    if (depth >= 4) return array();
    const uint8_t kind = c.u8() % 6;
    const int children = c.u8() % 5;
    int keys = 0;
    switch (kind) {
      case 0: b.dict(); keys = 1 + c.u8() % 3; break;
      case 1: b.list(); break;
      case 2: b.tuple(); break;
      case 3: b.named_tuple("Point"); keys = 1; break;
      case 4: b.ordered_dict(); keys = 1 + c.u8() % 3; break;
      default: b.custom("my.Type", c.bytes(c.u8() % 8)); keys = c.u8() % 2; break;
    }
    for (int i = 0; i < children; ++i) {
      key_for(keys, i);
      node(depth + 1);
    }
    b.end();
  }
};

bool same_bits(double a, uint64_t bits) {
  uint64_t x;
  std::memcpy(&x, &a, 8);
  return x == bits;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Split<8> in(data, size);
  Builder bld;
  bld.c.p = in.payload;
  bld.node(0);
  if (bld.c.u8() & 1) bld.b.metadata("note", bld.c.bytes(bld.c.u8() % 16));
  auto tree = std::move(bld.b).finish();
  JTREE_FUZZ_CHECK(tree.ok(), tree.status().to_string());
  const Tree reference = *tree;  // structure to compare with (inputs are shared pointers)

  WriteOptions wo;
  wo.codec = static_cast<Codec>(in.opt[0] % 2);
  wo.level = static_cast<int8_t>(in.opt[1]) % 8;
  wo.target_chunk_bytes = uint64_t{1} << (in.opt[2] % 16);
  constexpr uint64_t kInline[4] = {0, 16, 4096, 1 << 20};
  wo.inline_threshold = kInline[in.opt[3] % 4];
  constexpr uint32_t kAlign[6] = {64, 1, 8, 4096, 0, 48};
  wo.alignment = kAlign[in.opt[4] % 6];
  constexpr double kGains[4] = {0.03, 0.0, 0.9, -1.0};
  wo.min_gain = kGains[in.opt[5] % 4];
  wo.threads = 1 + in.opt[6] % 3;
  wo.max_bytes_in_flight = 1 + (uint64_t{in.opt[6]} << 8);

  fuzz::MemorySink sink;
  auto stats = save(std::move(*tree), sink, wo);
  if (!stats.ok()) {
    // Only the caller's mistakes may stop a save into memory: impossible options or
    // combinations the writer refuses by name.
    JTREE_FUZZ_CHECK(stats.status().is_invalid_argument(), stats.status().to_string());
    return 0;
  }
  JTREE_FUZZ_CHECK(sink.committed(), "save returned OK without committing");
  JTREE_FUZZ_CHECK(stats->file_size == sink.bytes().size(), "file size in the stats");

  auto opened = Reader::open(memory_source(std::move(sink.bytes()), "rt.jtree"));
  JTREE_FUZZ_CHECK(opened.ok(), "a file jtree wrote does not open: " + opened.status().to_string());
  const Reader& r = **opened;
  const Tree& t = r.tree();
  JTREE_FUZZ_CHECK(t.nodes.size() == reference.nodes.size(), "node count");
  JTREE_FUZZ_CHECK(t.leaves.size() == bld.expected.size(), "leaf count");
  for (size_t i = 0; i < t.nodes.size(); ++i) {
    const Node &a = t.nodes[i], &e = reference.nodes[i];
    JTREE_FUZZ_CHECK(a.kind == e.kind && a.key == e.key && a.num_children == e.num_children &&
                         a.type_name == e.type_name && a.aux_data == e.aux_data &&
                         a.leaf == e.leaf,
                     "node " + std::to_string(i) + " differs");
  }
  JTREE_FUZZ_CHECK(t.metadata == reference.metadata, "metadata differs");

  ReadOptions ro;
  ro.threads = wo.threads;
  ro.max_fetch_bytes = 1 + (uint64_t{in.opt[7]} << 6);
  fuzz::Rng rng{in.opt[7]};
  for (uint32_t l = 0; l < t.leaves.size(); ++l) {
    const Expected& e = bld.expected[l];
    const Leaf& leaf = t.leaves[l];
    const std::string where = "leaf " + t.leaf_path(l);
    JTREE_FUZZ_CHECK(leaf.kind == e.kind, where + ": kind");
    switch (e.kind) {
      case LeafKind::kInt: JTREE_FUZZ_CHECK(leaf.int_value == e.i, where); continue;
      case LeafKind::kFloat: JTREE_FUZZ_CHECK(same_bits(leaf.real, e.real_bits), where); continue;
      case LeafKind::kBool: JTREE_FUZZ_CHECK(leaf.bool_value == e.b, where); continue;
      case LeafKind::kComplex:
        JTREE_FUZZ_CHECK(same_bits(leaf.real, e.real_bits) && same_bits(leaf.imag, e.imag_bits),
                         where);
        continue;
      case LeafKind::kStr:
      case LeafKind::kBytes: {
        auto got = r.read_bytes(l, ro);
        JTREE_FUZZ_CHECK(got.ok(), where + ": " + got.status().to_string());
        JTREE_FUZZ_CHECK(got->size() == e.memory.size() &&
                             fuzz::same_bytes(got->data(), e.memory.data(), got->size()),
                         where + ": bytes differ");
        continue;
      }
      default: break;
    }
    JTREE_FUZZ_CHECK(leaf.dtype == e.dtype && leaf.shape == e.shape, where + ": spec");
    std::vector<std::byte> whole(e.memory.size());
    Status st = r.read(l, whole, ro);
    JTREE_FUZZ_CHECK(st.ok(), where + ": " + st.to_string());
    JTREE_FUZZ_CHECK(whole == e.memory, where + ": data differs");
    // A slice.
    Box box;
    for (uint64_t extent : e.shape) {
      const uint64_t lo = rng.below(extent + 1);
      box.begin.push_back(lo);
      box.end.push_back(lo + rng.below(extent - lo + 1));
    }
    const size_t item = dtype_info(e.dtype)->item_size;
    std::vector<std::byte> part(box.num_elements() * item);
    st = r.read_box(l, box, part, ro);
    JTREE_FUZZ_CHECK(st.ok(), where + ": slice: " + st.to_string());
    Shape idx = box.begin;
    for (uint64_t k = 0; k < box.num_elements(); ++k) {
      uint64_t off = 0;
      for (size_t d = 0; d < e.shape.size(); ++d) off = off * e.shape[d] + idx[d];
      JTREE_FUZZ_CHECK(fuzz::same_bytes(part.data() + k * item, e.memory.data() + off * item, item),
                       where + ": slice differs");
      for (size_t d = e.shape.size(); d-- > 0;) {
        if (++idx[d] < box.end[d]) break;
        idx[d] = box.begin[d];
      }
    }
  }
  auto rep = r.verify(ro);
  JTREE_FUZZ_CHECK(rep.ok() && rep->ok(),
                   rep.ok() ? rep->problems.front().status.to_string() : rep.status().to_string());
  return 0;
}
