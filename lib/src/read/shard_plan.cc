// A rank's part of a model (jtree/shard.h): split rules matched against leaf names, boxes per
// kind. Reads only the Reader's structure.
#include "jtree/shard.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>

#include "jtree/key_path.h"
#include "jtree/key_path_pattern.h"
#include "jtree/reader.h"

namespace jtree {

namespace {

constexpr std::array<const char*, 5> kKindNames = {"replicated", "column", "row", "vocab",
                                                   "experts"};

std::vector<std::string> split_dots(std::string_view text) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (;;) {
    const size_t dot = text.find('.', begin);
    out.emplace_back(text.substr(begin, dot == std::string_view::npos ? dot : dot - begin));
    if (dot == std::string_view::npos) return out;
    begin = dot + 1;
  }
}

bool is_index(const std::string& s) {
  return !s.empty() && s.size() <= 9 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Where an expert's index is in `name`: the position after the last "experts" component,
// when an integer is there; npos for a stacked experts tensor or a name with no "experts".
size_t expert_index_at(const std::vector<std::string>& name) {
  for (size_t i = name.size(); i-- > 0;) {
    if (name[i] == "experts") return i + 1 < name.size() && is_index(name[i + 1]) ? i + 1
                                                                                   : std::string::npos;
  }
  return std::string::npos;
}

bool under_experts(const std::vector<std::string>& name) {
  return std::find(name.begin(), name.end(), "experts") != name.end();
}

// The layer an expert belongs to: its name up to the "experts" component.
std::string expert_group(const std::vector<std::string>& name, size_t index_at) {
  std::string g;
  for (size_t i = 0; i < index_at; ++i) (g += name[i]) += '\x1f';
  return g;
}

// Block `rank` of `n` in blocks of ceil(n / world): [begin, end), empty past the end.
std::pair<uint64_t, uint64_t> ceil_block(uint64_t n, uint32_t rank, uint32_t world) {
  const uint64_t per = (n + world - 1) / world;
  const uint64_t b = std::min<uint64_t>(n, per * rank);
  return {b, std::min<uint64_t>(n, b + per)};
}

// How `spec` splits a leaf named `name` (first matching rule; experts first under
// expert_parallel). dim < 0: no box (every rank's whole leaf, or one expert's whole tensor).
struct LeafSplit {
  SplitKind kind = SplitKind::kReplicated;
  int dim = -1;
  bool even = false;                   // column and row splits: equal blocks required
  size_t expert_at = std::string::npos;  // one expert's tensor: where its index is in the name
};

LeafSplit leaf_split(const std::vector<std::string>& name, const ShardSpec& spec,
                     const std::vector<SplitRule>& rules) {
  LeafSplit s;
  if (spec.expert_parallel && under_experts(name)) {
    s.kind = SplitKind::kExperts;
    s.expert_at = expert_index_at(name);
    if (s.expert_at == std::string::npos) s.dim = 0;  // stacked: [E, ...] in ceil blocks
    return s;
  }
  for (const SplitRule& rule : rules) {
    if (!split_pattern_matches(rule.pattern, name)) continue;
    s.kind = rule.kind;
    if (rule.kind == SplitKind::kReplicated) return s;
    s.dim = rule.dim >= 0 ? rule.dim : rule.kind == SplitKind::kRow ? 1 : 0;
    s.even = rule.kind == SplitKind::kColumn || rule.kind == SplitKind::kRow;
    return s;
  }
  return s;
}

Status check_spec(const ShardSpec& spec, const std::vector<SplitRule>& rules,
                  const std::string& where) {
  if (spec.world == 0 || spec.rank >= spec.world) {
    return Status::invalid_argument(where + "shard rank " + std::to_string(spec.rank) +
                                    " of world " + std::to_string(spec.world) +
                                    ": the rank must be below the world size (>= 1)");
  }
  for (const SplitRule& rule : rules) {
    if (rule.pattern.empty()) {
      return Status::invalid_argument(where + "a split rule has an empty pattern");
    }
  }
  return Status::success();
}

// Checks that `shape` can be split as `s` (s.dim >= 0) over `world` ranks; `leaf` names the
// leaf in the message.
Status check_split(const Shape& shape, const LeafSplit& s, uint32_t world,
                   const std::string& leaf) {
  const char* kind = split_kind_name(s.kind);
  if (static_cast<size_t>(s.dim) >= shape.size()) {
    return Status::invalid_argument(
        leaf + ": a " + kind + " split of dimension " + std::to_string(s.dim) +
        ", but the leaf has rank " + std::to_string(shape.size()) +
        " (give the rule another dim, or a replicated rule before it)");
  }
  const uint64_t n = shape[static_cast<size_t>(s.dim)];
  if (s.even && n % world != 0) {
    return Status::invalid_argument(leaf + ": a " + kind + " split of dimension " +
                                    std::to_string(s.dim) + " (size " + std::to_string(n) +
                                    ") over " + std::to_string(world) +
                                    " ranks: the size must divide evenly");
  }
  return Status::success();
}

// Rank `rank`'s box of a leaf of `shape` split as `s` (checked by check_split).
Box rank_box(const Shape& shape, const LeafSplit& s, uint32_t rank, uint32_t world) {
  Box box = Box::all(shape);
  const auto d = static_cast<size_t>(s.dim);
  const auto [b, e] = ceil_block(shape[d], rank, world);
  box.begin[d] = b;
  box.end[d] = e;
  return box;
}

struct LeafName {
  uint32_t leaf;
  std::vector<std::string> name;
};

class Planner {
 public:
  Planner(const Reader& r, const ShardSpec& spec)
      : r_(r), spec_(spec), rules_(spec.rules.empty() ? default_split_rules() : spec.rules) {}

  Result<std::vector<ShardPart>> run() {
    JTREE_RETURN_IF_ERROR(check_spec(spec_, rules_, r_.name() + ": "));
    std::vector<LeafName> leaves;
    for (uint32_t i = 0; i < r_.num_leaves(); ++i) {
      if (r_.leaf(i).kind != LeafKind::kArray) continue;
      auto path = split_path(r_.leaf_path(i));
      if (!path.ok()) return path.status();
      leaves.push_back({i, shard_name(*path)});
    }
    if (spec_.expert_parallel) count_experts(leaves);
    std::vector<ShardPart> parts;
    parts.reserve(leaves.size());
    for (const LeafName& ln : leaves) {
      auto part = part_of(ln);
      if (!part.ok()) return part.status();
      parts.push_back(std::move(*part));
    }
    return parts;
  }

 private:
  void count_experts(const std::vector<LeafName>& leaves) {
    for (const LeafName& ln : leaves) {
      const size_t at = expert_index_at(ln.name);
      if (at == std::string::npos) continue;
      uint64_t& n = experts_[expert_group(ln.name, at)];
      n = std::max<uint64_t>(n, std::stoull(ln.name[at]) + 1);
    }
  }

  Result<ShardPart> part_of(const LeafName& ln) const {
    const Shape& shape = r_.leaf(ln.leaf).shape;
    const LeafSplit s = leaf_split(ln.name, spec_, rules_);
    ShardPart part;
    part.leaf = ln.leaf;
    part.kind = s.kind;
    if (s.expert_at != std::string::npos) {  // one tensor per expert: this rank's or not, whole
      const uint64_t e = std::stoull(ln.name[s.expert_at]);
      const auto [b, end] = ceil_block(experts_.at(expert_group(ln.name, s.expert_at)),
                                       spec_.rank, spec_.world);
      part.load = b <= e && e < end;
      return part;
    }
    if (s.dim < 0) return part;
    JTREE_RETURN_IF_ERROR(
        check_split(shape, s, spec_.world, r_.name() + ": leaf " + r_.leaf_path(ln.leaf)));
    if (spec_.world > 1) part.box = rank_box(shape, s, spec_.rank, spec_.world);
    return part;
  }

  const Reader& r_;
  const ShardSpec& spec_;
  const std::vector<SplitRule>& rules_;
  std::map<std::string, uint64_t> experts_;  // layer -> its number of experts
};

std::vector<SplitRule> make_default_rules() {
  std::vector<SplitRule> rules;
  for (const char* m : {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "wq", "wk", "wv",
                        "w1", "w3"}) {
    rules.push_back({std::string(m) + ".weight", SplitKind::kColumn, -1});
    rules.push_back({std::string(m) + ".bias", SplitKind::kColumn, -1});
  }
  for (const char* m : {"o_proj", "down_proj", "wo", "w2"}) {
    rules.push_back({std::string(m) + ".weight", SplitKind::kRow, -1});
  }
  for (const char* m : {"embed_tokens", "lm_head", "tok_embeddings", "output", "wte"}) {
    rules.push_back({std::string(m) + ".weight", SplitKind::kVocab, -1});
  }
  return rules;
}

}  // namespace

const char* split_kind_name(SplitKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kKindNames.size() ? kKindNames[i] : "unknown";
}

Result<SplitKind> parse_split_kind(std::string_view name) {
  for (size_t i = 0; i < kKindNames.size(); ++i) {
    if (name == kKindNames[i]) return static_cast<SplitKind>(i);
  }
  return Status::invalid_argument("unknown split kind '" + std::string(name) +
                                  "' (replicated, column, row, vocab or experts)");
}

const std::vector<SplitRule>& default_split_rules() {
  static const std::vector<SplitRule> rules = make_default_rules();
  return rules;
}

std::vector<std::string> shard_name(const std::vector<std::string>& key_path) {
  std::vector<std::string> name;
  for (const std::string& component : key_path) {
    for (std::string& part : split_dots(component)) name.push_back(std::move(part));
  }
  return name;
}

bool split_pattern_matches(std::string_view pattern, const std::vector<std::string>& name) {
  const std::vector<std::string> globs = split_dots(pattern);
  if (globs.size() > name.size()) return false;
  const size_t offset = name.size() - globs.size();
  for (size_t i = 0; i < globs.size(); ++i) {
    if (!glob_match(globs[i], name[offset + i])) return false;
  }
  return true;
}

Result<std::vector<ShardPart>> plan_shard(const Reader& reader, const ShardSpec& spec) {
  return Planner(reader, spec).run();
}

Result<std::vector<Box>> shard_layout_boxes(std::string_view key_path, const Shape& shape,
                                            const ShardSpec& spec) {
  const std::vector<SplitRule>& rules = spec.rules.empty() ? default_split_rules() : spec.rules;
  ShardSpec any_rank = spec;
  any_rank.rank = 0;
  JTREE_RETURN_IF_ERROR(check_spec(any_rank, rules, ""));
  auto components = split_path(key_path);
  if (!components.ok()) return components.status();
  const LeafSplit s = leaf_split(shard_name(*components), spec, rules);
  std::vector<Box> boxes;
  if (s.dim < 0 || spec.world == 1) return boxes;
  JTREE_RETURN_IF_ERROR(check_split(shape, s, spec.world, "leaf " + std::string(key_path)));
  for (uint32_t rank = 0; rank < spec.world; ++rank) {
    boxes.push_back(rank_box(shape, s, rank, spec.world));
  }
  return boxes;
}

}  // namespace jtree
