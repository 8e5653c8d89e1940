// jtree/key_path_pattern.h — key-path patterns ("params/*/kernel", "**/bias"): which parts of
// a tree a selection names. The one rule for them: the Python package's keys= selections
// (jtree._keypath.PatternSet, and the native load of a selection) use this class.
//
// A pattern is written as a key path (jtree/key_path.h: components joined by '/', '\' escapes)
// and split the same way. Each component matches one key (a string key as it is, an int key
// or a position in decimal) with shell-style wildcards, by Unicode code point, exactly as
// Python's fnmatch.fnmatchcase does: '*' any run of characters, '?' one character, "[seq]" one
// character of seq (ranges "a-z"), "[!seq]" one character not in it; a '[' without its ']' is
// itself. The component "**" matches any number of components, none included. A pattern that
// matches a container's path selects everything below it; the pattern "" (no components)
// matches the root, so everything.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "jtree/export.h"
#include "jtree/status.h"

namespace jtree {

/// Whether one key (`text`, UTF-8) matches one pattern component (`glob`, UTF-8) by the rules
/// above ('**' is not special here: it is two '*').
JTREE_API bool glob_match(std::string_view glob, std::string_view text);

class JTREE_API KeyPathPatterns {
 public:
  /// The patterns, each split as a key path (InvalidArgument for one ending with an
  /// unfinished escape '\', naming it).
  static Result<KeyPathPatterns> make(const std::vector<std::string>& patterns);

  KeyPathPatterns(KeyPathPatterns&&) noexcept;
  KeyPathPatterns& operator=(KeyPathPatterns&&) noexcept;
  ~KeyPathPatterns();

  /// How many patterns there are.
  size_t size() const;

  /// Whether pattern `i` matches `path` (the components of a key path) or one of its
  /// prefixes: whether it selects what is at `path`.
  bool selects(size_t i, std::span<const std::string> path) const;

  /// Whether any pattern selects what is at `path`; with `matched` (size() entries), sets
  /// matched[i] for every pattern i that does (a selection reports the patterns that matched
  /// nothing).
  bool selects(std::span<const std::string> path, std::vector<char>* matched = nullptr) const;

  /// False when no pattern can select anything at `path` or below it (a subtree a selection
  /// need not look into); true when one might ("**" always might).
  bool may_select_below(std::span<const std::string> path) const;

  /// Whether a selection may have to look into every container: a pattern "" or one whose
  /// first component has a wildcard ("**" included). False when each names its first key.
  bool may_walk_everything() const;

 private:
  struct Compiled;
  explicit KeyPathPatterns(std::unique_ptr<Compiled> c);
  std::unique_ptr<Compiled> c_;
};

}  // namespace jtree
