// A rank's part of a model for jtree._jtree.Reader.shard_plan: jtree::plan_shard translated.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>

#include "jtree/reader.h"
#include "jtree/shard.h"

namespace nb = nanobind;

namespace jtpy {

/// A ShardSpec from Python values; rules: [(pattern, kind name, dim)] or None (the defaults).
/// Raises InvalidArgumentError for an unknown kind name.
jtree::ShardSpec shard_spec(uint32_t rank, uint32_t world, bool expert_parallel,
                            nb::handle rules);

/// rules: [(pattern, kind name, dim)] or None (jtree::default_split_rules). Returns
/// [(leaf, kind name, load, begin | None, end | None, key path)], one per array leaf
/// (jtree::ShardPart);
/// raises through the Status mapping (InvalidArgumentError naming the file and the leaf).
nb::list shard_plan(const jtree::Reader& reader, uint32_t rank, uint32_t world,
                    bool expert_parallel, nb::object rules);

/// The split kinds' names in jtree::SplitKind order (jtree::split_kind_name), a tuple.
nb::tuple split_kind_names();

/// jtree::default_split_rules() as [(pattern, kind name, dim)].
nb::list default_split_rules();

}  // namespace jtpy
