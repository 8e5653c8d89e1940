#include "read/read_tree.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>

#include "tree/structure.h"

namespace jtree {

// The decoded leaves and the built Tree, behind a pointer so that a ReadTree can move.
struct ReadTree::Lazy {
  explicit Lazy(size_t leaves)
      // calloc: the kernel backs the zeroed pages only where leaves are decoded, so a file of
      // a million leaves costs nothing here until its leaves are used.
      : slots(static_cast<const Leaf**>(std::calloc(leaves ? leaves : 1, sizeof(Leaf*)))) {
    if (!slots) throw std::bad_alloc();
  }
  ~Lazy() { std::free(slots); }

  const Leaf** slots;  // read and set through std::atomic_ref
  std::mutex mu;       // guards owned
  std::vector<std::unique_ptr<Leaf>> owned;
  std::once_flag tree_once;
  Tree tree;
};

ReadTree::ReadTree() : lazy_(std::make_unique<Lazy>(0)) {}
ReadTree::ReadTree(format::HeaderView header)
    : header_(std::move(header)), lazy_(std::make_unique<Lazy>(header_.num_leaves())) {}
ReadTree::ReadTree(ReadTree&&) noexcept = default;
ReadTree& ReadTree::operator=(ReadTree&&) noexcept = default;
ReadTree::~ReadTree() = default;

const Leaf& ReadTree::leaf(uint32_t i) const {
  std::atomic_ref<const Leaf*> slot(lazy_->slots[i]);
  if (const Leaf* l = slot.load(std::memory_order_acquire)) return *l;
  auto decoded = std::make_unique<Leaf>();
  header_.decode_leaf(i, *decoded);
  std::lock_guard lock(lazy_->mu);
  // Another thread may have decoded it meanwhile: the first one stays (references to it may
  // be out already).
  if (const Leaf* l = slot.load(std::memory_order_acquire)) return *l;
  const Leaf* l = decoded.get();
  lazy_->owned.push_back(std::move(decoded));
  slot.store(l, std::memory_order_release);
  return *l;
}

std::vector<uint32_t> ReadTree::children(uint32_t node) const {
  return child_nodes(navigation(), node, header_.node(node).num_children);
}

std::string ReadTree::path(uint32_t node) const {
  return node_path(header_.nodes(), navigation(), node);
}

Result<uint32_t> ReadTree::find(std::string_view path_str) const {
  return find_node(header_.nodes(), navigation(), path_str);
}

const Tree& ReadTree::tree() const {
  std::call_once(lazy_->tree_once, [&] {
    auto t = header_.decode_all();
    if (!t.ok()) {
      // open_header ran the same checks on the same bytes: this is a bug, not a bad file.
      std::fprintf(stderr, "jtree: internal error: a checked header fails to decode: %s\n",
                   t.status().to_string().c_str());
      std::abort();
    }
    lazy_->tree = std::move(*t);
  });
  return lazy_->tree;
}

}  // namespace jtree
