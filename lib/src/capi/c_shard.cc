// capi/c_shard.cc — a rank's part of a model (jtree::plan_shard) as C read requests.
#include <string>
#include <vector>

#include "capi/c_internal.h"
#include "jtree/dtype.h"
#include "jtree/shard.h"

using jtree::capi::check_reader;
using jtree::capi::enum_int;
using jtree::capi::guard;
using jtree::capi::invalid;
using jtree::capi::report;

struct jtree_shard_plan_t {
  std::vector<jtree::ShardPart> parts;
  std::vector<uint64_t> bytes;  // each part's destination size
};

namespace {

// The C rules as C++ ones; InvalidArgument for a NULL pattern or an unknown kind.
jtree_status_t translate_rules(const jtree_split_rule_t* rules, size_t n, const char* fn,
                               std::vector<jtree::SplitRule>* out, jtree_error_t** err) {
  for (size_t i = 0; i < n; ++i) {
    const std::string what = "rule " + std::to_string(i);
    if (rules[i].pattern == nullptr) return invalid(err, fn, what + ": pattern is NULL");
    const int kind = enum_int(rules[i].kind);
    if (kind < JTREE_SPLIT_REPLICATED || kind > JTREE_SPLIT_EXPERTS) {
      return invalid(err, fn, what + ": unknown split kind " + std::to_string(kind));
    }
    out->push_back({rules[i].pattern, static_cast<jtree::SplitKind>(kind), rules[i].dim});
  }
  return JTREE_OK;
}

}  // namespace

extern "C" {

jtree_status_t jtree_shard_plan_make(const jtree_reader_t* reader, uint32_t rank, uint32_t world,
                                     int expert_parallel, const jtree_split_rule_t* rules,
                                     size_t num_rules, jtree_shard_plan_t** out,
                                     jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_shard_plan_make";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    if (num_rules != 0) JTREE_C_REQUIRE(rules, fn, err);
    jtree::ShardSpec spec{rank, world, expert_parallel != 0, {}};
    JTREE_C_CHECK(translate_rules(rules, num_rules, fn, &spec.rules, err));
    const jtree::Reader& r = *reader->reader;
    auto parts = jtree::plan_shard(r, spec);
    if (!parts.ok()) return report(parts.status(), err);
    auto plan = std::make_unique<jtree_shard_plan_t>();
    plan->parts = std::move(*parts);
    for (const jtree::ShardPart& p : plan->parts) {
      const jtree::Leaf& leaf = r.leaf(p.leaf);
      plan->bytes.push_back(p.box ? jtree::memory_bytes(leaf.dtype, p.box->num_elements())
                                  : leaf.memory_bytes());
    }
    *out = plan.release();
    return JTREE_OK;
  });
}

size_t jtree_shard_plan_count(const jtree_shard_plan_t* plan) {
  return plan == nullptr ? 0 : plan->parts.size();
}

jtree_status_t jtree_shard_plan_part(const jtree_shard_plan_t* plan, size_t index,
                                     jtree_split_kind_t* kind, int* load,
                                     jtree_read_request_t* request, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_shard_plan_part";
    JTREE_C_REQUIRE(plan, fn, err);
    if (index >= plan->parts.size()) {
      return invalid(err, fn, "part " + std::to_string(index) + " of a plan of " +
                                  std::to_string(plan->parts.size()));
    }
    const jtree::ShardPart& p = plan->parts[index];
    if (kind != nullptr) *kind = static_cast<jtree_split_kind_t>(p.kind);
    if (load != nullptr) *load = p.load ? 1 : 0;
    if (request != nullptr) {
      request->leaf = p.leaf;
      request->rank = p.box ? p.box->begin.size() : 0;
      request->begin = p.box ? p.box->begin.data() : nullptr;
      request->end = p.box ? p.box->end.data() : nullptr;
      request->dst = nullptr;
      request->dst_bytes = static_cast<size_t>(plan->bytes[index]);
    }
    return JTREE_OK;
  });
}

void jtree_shard_plan_free(jtree_shard_plan_t* plan) { delete plan; }

jtree_status_t jtree_write_options_set_shard_layout(jtree_write_options_t* opts, uint32_t world,
                                                    int expert_parallel,
                                                    const jtree_split_rule_t* rules,
                                                    size_t num_rules, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_write_options_set_shard_layout";
    JTREE_C_REQUIRE(opts, fn, err);
    if (num_rules != 0) JTREE_C_REQUIRE(rules, fn, err);
    jtree::WriteOptions write = opts->write;
    if (world == 0 && num_rules == 0) {  // no layout
      write.shard_layout.reset();
    } else {
      jtree::ShardSpec spec{0, world, expert_parallel != 0, {}};
      JTREE_C_CHECK(translate_rules(rules, num_rules, fn, &spec.rules, err));
      write.shard_layout = std::move(spec);
    }
    if (jtree::Status st = write.check(); !st.ok()) return invalid(err, fn, st.message());
    opts->write = std::move(write);
    return JTREE_OK;
  });
}

}  // extern "C"
