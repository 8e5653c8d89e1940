// jtree/shard.h — a rank's part of a model for tensor- and expert-parallel serving.
//
// A serving stack that splits a model over `world` ranks loads on each rank only that rank's
// slices: column-parallel weights (q/k/v, gate/up) by their output dimension, row-parallel
// weights (o, down) by their input dimension, embeddings and the output head by vocabulary
// rows, the experts of an MoE layer by expert index, everything else whole (replicated).
// plan_shard() turns (rank, world) and the split rules into the boxes to read, which one
// Reader::read_many() (or read_many_to_device()) then reads in one pass, fetching only the
// chunks (and, for raw chunks, the byte runs) the boxes overlap.
//
// Names: a rule's pattern is matched against a leaf's *name*, its key path with both '/' and
// '.' taken as separators ("model.layers.0.self_attn.q_proj.weight", the flat names of a
// torch state_dict or a safetensors file, and model/layers/0/self_attn/q_proj/weight are the
// same name). A pattern is a dotted suffix of names ("q_proj.weight"), each of its components
// glob-matched against one component of the name as key-path patterns are
// (jtree/key_path_pattern.h: '*', '?', "[seq]"); it matches a name that ends with components
// matching it. The first rule that matches a leaf decides its split.
//
// Thread safety: the functions here are pure; plan_shard() only reads the (thread-safe)
// Reader's structure, never chunk data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "jtree/export.h"
#include "jtree/status.h"
#include "jtree/tree.h"

namespace jtree {

class Reader;

/// How a leaf is split over the ranks.
enum class SplitKind : uint8_t {
  kReplicated = 0,  ///< every rank loads the whole leaf
  kColumn = 1,      ///< even split of dimension 0 (a torch Linear's output dimension)
  kRow = 2,         ///< even split of dimension 1 (a torch Linear's input dimension)
  kVocab = 3,       ///< dimension 0 in blocks of ceil(n / world) rows (the last ranks' may be
                    ///< shorter or empty; serving stacks pad them)
  kExperts = 4,     ///< expert parallelism: each rank loads its block of ceil(E / world)
                    ///< experts whole. An expert is the leaf's name component after a component
                    ///< "experts" when that is an integer (one tensor per expert; the E of the
                    ///< layer is one more than its largest index in the file); a stacked tensor
                    ///< (no integer after "experts") is split along its dimension 0.
};

/// The name of a kind ("replicated", "column", "row", "vocab", "experts"); parse_split_kind
/// is its inverse (InvalidArgument naming the text otherwise).
JTREE_API const char* split_kind_name(SplitKind kind);
JTREE_API Result<SplitKind> parse_split_kind(std::string_view name);

/// One rule: leaves whose name matches `pattern` are split as `kind`, along `dim` (-1: the
/// kind's own dimension: 0, or 1 for kRow; a JAX/flax kernel, stored [in, out], gives its
/// column-parallel rule dim 1 and its row-parallel rule dim 0).
struct JTREE_API SplitRule {
  std::string pattern;
  SplitKind kind = SplitKind::kReplicated;
  int dim = -1;
};

/// The rules of the common decoder models' names (Llama, Mistral, Qwen, Mixtral, Gemma, as
/// Hugging Face and Meta name them): column q_proj, k_proj, v_proj, gate_proj, up_proj, wq, wk,
/// wv, w1, w3 (weights and biases); row o_proj, down_proj, wo, w2 (weights); vocab
/// embed_tokens, lm_head, tok_embeddings, output, wte (weights). Everything else replicated.
JTREE_API const std::vector<SplitRule>& default_split_rules();

/// What plan_shard() is asked.
struct JTREE_API ShardSpec {
  uint32_t rank = 0;
  uint32_t world = 1;
  /// Experts whole per rank (kExperts before every rule, for leaves under an "experts"
  /// component); false: experts are split by the rules like any other weight (tensor
  /// parallelism inside each expert, serving stacks' default).
  bool expert_parallel = false;
  /// First match wins; empty: default_split_rules().
  std::vector<SplitRule> rules;
};

/// One array leaf's part for the rank.
struct JTREE_API ShardPart {
  uint32_t leaf = 0;
  SplitKind kind = SplitKind::kReplicated;
  bool load = true;        ///< false: the leaf is another rank's (an expert it does not hold)
  std::optional<Box> box;  ///< nullopt: the whole leaf (replicated, or a split of world 1)
};

/// The rank's part of every array leaf of the file, in leaf order (payload leaves other than
/// arrays, such as strings, are not listed: they are everyone's). Reads only the structure.
/// Errors: InvalidArgument, naming the file and the leaf's key path, for a world of 0 or a
/// rank >= world, a kColumn / kRow leaf whose dimension does not divide by world, a rule
/// whose dimension the leaf does not have, an empty pattern.
JTREE_API Result<std::vector<ShardPart>> plan_shard(const Reader& reader, const ShardSpec& spec);

/// Every rank's part of one array leaf, from its key path and shape alone (no file, no rank:
/// spec.rank is not used): the boxes of ranks 0..world-1 for a leaf the rules split, in rank
/// order; none for a leaf every rank loads whole (replicated, a split over one rank) and for
/// one expert's tensor (whole, by expert). The writer cuts a leaf's chunk grid at these boxes'
/// edges (WriteOptions::shard_layout), so that each rank of `world` ranks, or of any divisor
/// of it, reads whole chunks of its part. Errors: InvalidArgument as plan_shard's, naming the
/// leaf's key path.
JTREE_API Result<std::vector<Box>> shard_layout_boxes(std::string_view key_path,
                                                      const Shape& shape, const ShardSpec& spec);

/// The name of a key path (its components, each split at '.'), as the rules see it.
JTREE_API std::vector<std::string> shard_name(const std::vector<std::string>& key_path);

/// Whether `pattern` (a dotted suffix, see above) matches `name` (shard_name's).
JTREE_API bool split_pattern_matches(std::string_view pattern,
                                     const std::vector<std::string>& name);

}  // namespace jtree
