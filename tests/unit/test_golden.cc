// Golden files committed under tests/golden: valid files from each writer option must keep
// loading with exactly their content (backward compatibility), and each broken file must be
// refused with exactly its error (tests/golden/manifest.txt).
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <doctest/doctest.h>

#include "golden/golden_data.h"
#include "jtree/jtree.h"

using namespace jtree;

namespace {

std::string golden_dir() {
  const char* d = std::getenv("JTREE_TEST_DATA");
  REQUIRE_MESSAGE(d != nullptr, "JTREE_TEST_DATA must point at tests/ (ctest sets it)");
  return std::string(d) + "/golden/";
}

// Reads every payload leaf and verifies the file; returns the first error.
Status read_everything(const Reader& r) {
  for (uint32_t l = 0; l < r.tree().leaves.size(); ++l) {
    const Leaf& leaf = r.tree().leaves[l];
    if (!leaf.is_payload()) continue;
    std::vector<std::byte> buf(leaf.memory_bytes());
    JTREE_RETURN_IF_ERROR(r.read(l, buf));
  }
  auto rep = r.verify();
  if (!rep.ok()) return rep.status();
  if (!rep->ok()) return rep->problems.front().status;
  return Status::success();
}

void check_basic(const Reader& r, int64_t step) {
  const Tree& t = r.tree();
  for (const auto& a : golden::basic_arrays()) {
    CAPTURE(a.key);
    auto leaf = r.find_leaf("arrays/" + a.key);
    REQUIRE(leaf.ok());
    const Leaf& l = t.leaves[*leaf];
    CHECK(l.dtype == a.dtype);
    CHECK(l.shape == a.shape);
    std::vector<std::byte> got(l.memory_bytes());
    REQUIRE(r.read(*leaf, got).ok());
    CHECK(got == a.data);
  }
  auto leaf = [&](const char* p) -> const Leaf& { return t.leaves[*r.find_leaf(p)]; };
  CHECK(leaf("step").int_value == step);
  CHECK(leaf("lr").real == 0.001);
  CHECK(leaf("flag").bool_value == false);
  CHECK(leaf("z").imag == -1);
  CHECK(*r.read_bytes(*r.find_leaf("name")) == "golden");
  CHECK(*r.read_bytes(*r.find_leaf("blob")) == std::string(5000, 'b'));
  CHECK(t.nodes[*t.find("nothing")].kind == NodeKind::kNone);
  CHECK(t.nodes[*t.find("list/2")].kind == NodeKind::kTuple);
  CHECK(t.nodes[*t.find("point")].type_name == "Point");
  CHECK(t.nodes[*t.find("custom")].aux_data == "aux");
  CHECK(*r.read_bytes(*r.find_leaf("7")) == "int key");
  CHECK(*r.find_leaf("tied") == *r.find_leaf("arrays/w_bf16"));
  CHECK(t.metadata.front().second == "golden file");
}

}  // namespace

TEST_CASE("valid golden files load with their exact content") {
  const std::string dir = golden_dir() + "valid/";
  for (const char* name : {"basic.jtree", "basic_raw.jtree", "basic_aligned_level19.jtree"}) {
    CAPTURE(name);
    auto r = Reader::open(dir + name);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK((*r)->info().generation == 0);
    check_basic(**r, 123456789);
    CHECK(read_everything(**r).ok());
  }
  for (const char* name : {"appended.jtree", "torn_append.jtree"}) {
    CAPTURE(name);
    auto r = Reader::open(dir + name);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK((*r)->info().generation == 1);
    CHECK((*r)->info().recovered == (std::string(name) == "torn_append.jtree"));
    check_basic(**r, 1000);
    CHECK(*(*r)->read_bytes(*(*r)->find_leaf("extra")) ==
          std::string(reinterpret_cast<const char*>(golden::pattern(100000, 99).data()), 100000));
    CHECK(read_everything(**r).ok());
  }
  {
    auto r = Reader::open(dir + "compacted.jtree");
    REQUIRE(r.ok());
    CHECK((*r)->info().generation == 0);
    check_basic(**r, 1000);
    auto rep = (*r)->verify();
    CHECK(rep->ok());
  }
  {
    auto r = Reader::open(dir + "scalar_root.jtree");
    REQUIRE(r.ok());
    CHECK((*r)->tree().leaves[0].int_value == -5);
  }
  {
    // Format version 2's dtypes: every leaf's bytes, and the versions a reader needs.
    auto r = Reader::open(dir + "dtypes_v2.jtree");
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK((*r)->info().writer_version == 2);
    CHECK((*r)->info().min_read_version == 2);
    CHECK((*r)->info().min_write_version == 2);
    const auto arrays = golden::v2_dtype_arrays();
    for (const auto& a : arrays) {
      CAPTURE(a.key);
      auto leaf = (*r)->find_leaf(a.key);
      REQUIRE(leaf.ok());
      const Leaf& l = (*r)->tree().leaves[*leaf];
      CHECK(l.dtype == a.dtype);
      CHECK(l.shape == a.shape);
      CHECK(l.storage == (a.shape.size() == 2 ? Storage::kChunked : Storage::kInline));
      std::vector<std::byte> got(l.memory_bytes());
      REQUIRE((*r)->read(*leaf, got).ok());
      CHECK(got == a.data);
    }
    CHECK(read_everything(**r).ok());
  }
  {
    // Format version 2's rectilinear chunk grid: the bounds, the data, and slices across them.
    auto r = Reader::open(dir + "rectilinear.jtree");
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK((*r)->info().min_read_version == 2);
    const Leaf& l = (*r)->tree().leaves[0];
    CHECK(l.chunk_shape.empty());
    CHECK(l.chunk_bounds == Shape{13, 31, 50, 3, 7});
    const auto data = golden::rectilinear_data();
    std::vector<std::byte> got(data.size());
    REQUIRE((*r)->read(0, got).ok());
    CHECK(got == data);
    std::vector<std::byte> part(20 * 2 * 4);  // rows [12, 32) x columns [2, 4)
    REQUIRE((*r)->read_box(0, {{12, 2}, {32, 4}}, part).ok());
    for (uint64_t i = 0; i < 20; ++i) {
      for (uint64_t j = 0; j < 2; ++j) {
        CHECK(std::memcmp(&part[(i * 2 + j) * 4], &data[((12 + i) * 7 + 2 + j) * 4], 4) == 0);
      }
    }
    CHECK(read_everything(**r).ok());
  }
  {
    // Version-1 files: min_read_version 1 (basic.jtree) is what version-1 readers accept.
    auto r = Reader::open(dir + "basic.jtree");
    REQUIRE(r.ok());
    CHECK((*r)->info().writer_version == 1);
    CHECK((*r)->info().min_read_version == 1);
  }
  {
    // Format version 3: a metadata value marked as text; nothing a version-1 reader lacks.
    auto r = Reader::open(dir + "text_metadata_v3.jtree");
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK((*r)->info().writer_version == 3);
    CHECK((*r)->info().min_read_version == 1);
    CHECK((*r)->metadata_text_keys() == std::vector<std::string>{"note"});
    CHECK((*r)->metadata()[0].second == std::string("\xff\x00", 2));
    CHECK((*r)->metadata()[1].second == "caf\xc3\xa9");
  }
  {
    // A version-1 body marked min_read_version 2 (the old broken/future_version.jtree): what a
    // version-1 reader refused, a version-2 reader reads.
    auto r = Reader::open(dir + "min_read_2.jtree");
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK((*r)->info().min_read_version == 2);
    check_basic(**r, 123456789);
    CHECK(read_everything(**r).ok());
  }
  {
    // The same marked min_read_version 3 (the old broken/future_version_3.jtree): what a
    // version-2 reader refused, a version-3 reader reads.
    auto r = Reader::open(dir + "min_read_3.jtree");
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    CHECK((*r)->info().min_read_version == 3);
    CHECK(read_everything(**r).ok());
  }
  {
    auto r = Reader::open(dir + "many_leaves.jtree");
    REQUIRE(r.ok());
    CHECK((*r)->tree().leaves.size() == 2000);
    CHECK((*r)->tree().leaves[*(*r)->find_leaf("leaf1999")].real == 999.5);
  }
}

TEST_CASE("every broken golden file gives exactly its error") {
  std::ifstream manifest(golden_dir() + "manifest.txt");
  REQUIRE(manifest.good());
  std::string line;
  int checked = 0;
  while (std::getline(manifest, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string path, code, message;
    std::getline(in, path, '|');
    std::getline(in, code, '|');
    std::getline(in, message, '|');  // (then the sections the file covers)
    if (code == "OK") continue;      // a valid vector: the next test case
    CAPTURE(path);
    auto r = Reader::open(golden_dir() + path);
    Status st = r.ok() ? read_everything(**r) : r.status();
    REQUIRE_MESSAGE(!st.ok(), path << " was accepted");
    CHECK(status_code_name(st.code()) == code);
    CHECK_MESSAGE(st.message().find(message) != std::string::npos,
                  "message: " << st.message() << "\nexpected to contain: " << message);
    CHECK(st.message().find(path.substr(path.find('/') + 1)) != std::string::npos);  // names the file
    ++checked;
  }
  CHECK(checked >= 25);
}

// The manifest's lines: path, code, message, sections (comma-separated); and the sections the
// '# uncovered: S | why' comments name.
struct ManifestLine {
  std::string path, code, message;
  std::vector<std::string> sections;
};

static std::vector<ManifestLine> read_manifest(std::set<std::string>* uncovered) {
  std::ifstream manifest(golden_dir() + "manifest.txt");
  REQUIRE(manifest.good());
  std::vector<ManifestLine> out;
  std::string line;
  const std::string mark = "# uncovered: ";
  while (std::getline(manifest, line)) {
    if (line.rfind(mark, 0) == 0) {
      uncovered->insert(line.substr(mark.size(), line.find(' ', mark.size()) - mark.size()));
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    ManifestLine m;
    std::string sections;
    std::getline(in, m.path, '|');
    std::getline(in, m.code, '|');
    std::getline(in, m.message, '|');
    std::getline(in, sections);
    std::istringstream ss(sections);
    for (std::string sec; std::getline(ss, sec, ',');) m.sections.push_back(sec);
    out.push_back(std::move(m));
  }
  return out;
}

TEST_CASE("every valid vector of the manifest opens, reads in full and verifies clean") {
  std::set<std::string> uncovered;
  int checked = 0;
  for (const ManifestLine& m : read_manifest(&uncovered)) {
    if (m.code != "OK") continue;
    CAPTURE(m.path);
    auto r = Reader::open(golden_dir() + m.path);
    REQUIRE_MESSAGE(r.ok(), r.status().to_string());
    const Status st = read_everything(**r);
    CHECK_MESSAGE(st.ok(), st.to_string());
    ++checked;
  }
  CHECK(checked >= 10);
}

// Test vectors are what another implementation tests itself against: every section of
// FORMAT.md that states a MUST or MUST NOT has at least one golden file, or says in the
// manifest why not and where its rules are tested.
TEST_CASE("every FORMAT.md section with a MUST has a golden vector") {
  std::ifstream spec(golden_dir() + "../../spec/FORMAT.md");
  REQUIRE(spec.good());
  const std::regex heading(R"(^#{2,4} ([0-9]+(\.[0-9]+)*)\.? )");
  std::set<std::string> sections, with_must;
  std::string current, line;
  while (std::getline(spec, line)) {
    std::smatch m;
    if (std::regex_search(line, m, heading)) {
      current = m[1];
      sections.insert(current);
      continue;
    }
    if (!current.empty() && line.find("MUST") != std::string::npos) with_must.insert(current);
  }
  REQUIRE(with_must.size() >= 10);
  std::set<std::string> uncovered, covered;
  for (const ManifestLine& m : read_manifest(&uncovered)) {
    for (const std::string& s : m.sections) {
      CAPTURE(m.path);
      CHECK_MESSAGE(sections.count(s) == 1, "manifest names section " << s
                                                << ", which FORMAT.md does not have");
      covered.insert(s);
    }
  }
  for (const std::string& s : with_must) {
    CHECK_MESSAGE(covered.count(s) + uncovered.count(s) > 0,
                  "FORMAT.md section " << s << " states a MUST but no golden file covers it "
                                           "(tests/golden/make_golden.cc: kSections/kValid)");
  }
  for (const std::string& s : uncovered) CHECK_MESSAGE(with_must.count(s) == 1, s);
}
