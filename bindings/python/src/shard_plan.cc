// A rank's part of a model (jtree/shard.h) for the Python package: translation only.
#include "shard_plan.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common.h"
#include "jtree/shard.h"

namespace jtpy {

namespace {

nb::tuple numbers(const std::vector<uint64_t>& v) {
  nb::list out;
  for (uint64_t x : v) out.append(x);
  return nb::tuple(out);
}

}  // namespace

jtree::ShardSpec shard_spec(uint32_t rank, uint32_t world, bool expert_parallel,
                            nb::handle rules) {
  jtree::ShardSpec spec{rank, world, expert_parallel, {}};
  if (!rules.is_none()) {
    for (nb::handle rule : rules) {
      auto [pattern, kind_name, dim] = nb::cast<std::tuple<std::string, std::string, int>>(rule);
      auto kind = jtree::parse_split_kind(kind_name);
      if (!kind.ok()) raise_status(kind.status());
      spec.rules.push_back({std::move(pattern), *kind, dim});
    }
  }
  return spec;
}

nb::list shard_plan(const jtree::Reader& reader, uint32_t rank, uint32_t world,
                    bool expert_parallel, nb::object rules) {
  const jtree::ShardSpec spec = shard_spec(rank, world, expert_parallel, rules);
  jtree::Result<std::vector<jtree::ShardPart>> parts = [&] {
    nb::gil_scoped_release release;
    return jtree::plan_shard(reader, spec);
  }();
  if (!parts.ok()) raise_status(parts.status());
  nb::list out;
  for (const jtree::ShardPart& p : *parts) {
    out.append(nb::make_tuple(p.leaf, jtree::split_kind_name(p.kind), p.load,
                              p.box ? nb::object(numbers(p.box->begin)) : nb::none(),
                              p.box ? nb::object(numbers(p.box->end)) : nb::none(),
                              decode_utf8(reader.leaf_path(p.leaf))));
  }
  return out;
}

nb::tuple split_kind_names() {
  nb::list out;
  for (auto k = static_cast<uint8_t>(jtree::SplitKind::kReplicated);
       k <= static_cast<uint8_t>(jtree::SplitKind::kExperts); ++k) {
    out.append(jtree::split_kind_name(static_cast<jtree::SplitKind>(k)));
  }
  return nb::tuple(out);
}

nb::list default_split_rules() {
  nb::list out;
  for (const jtree::SplitRule& r : jtree::default_split_rules()) {
    out.append(nb::make_tuple(r.pattern, jtree::split_kind_name(r.kind), r.dim));
  }
  return out;
}

}  // namespace jtpy
