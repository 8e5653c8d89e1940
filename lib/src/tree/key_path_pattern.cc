// Key-path patterns (jtree/key_path_pattern.h).
//
// Why by hand: the components' wildcards must match exactly as Python's fnmatch.fnmatchcase
// (the rule keys= selections had when Python matched them, and which users know), by code
// point, and no library in our dependencies does that: fnmatch(3) works on bytes with other
// bracket rules, and a regex engine would need Python's translation anyway. So a component is
// translated the way fnmatch.translate does (Python 3.11-3.13: its handling of '-' ranges and
// empty ranges included) into single-character tokens and '*', which match by the classic
// backtracking to the last '*' (correct when every other token takes one character).
// tests/python/test_keypath_native.py compares it with fnmatchcase on many patterns.
#include "jtree/key_path_pattern.h"

#include <algorithm>
#include <utility>

#include "jtree/key_path.h"

namespace jtree {

namespace {

// The code points of UTF-8 `s` (keys and patterns are valid UTF-8; a stray byte stands for
// itself).
std::u32string code_points(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
    if (len == 1 || i + len > s.size()) {
      out.push_back(b);
      ++i;
      continue;
    }
    char32_t c = b & (0x7F >> len);
    for (int k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(c);
    i += len;
  }
  return out;
}

struct CharSet {
  bool negated = false;
  std::vector<std::pair<char32_t, char32_t>> ranges;  // inclusive
  bool contains(char32_t c) const {
    const bool in = std::any_of(ranges.begin(), ranges.end(),
                                [c](const auto& r) { return r.first <= c && c <= r.second; });
    return in != negated;
  }
};

struct Token {
  enum Kind : uint8_t { kChar, kAny, kStar, kSet, kNever } kind;
  char32_t c = 0;    // kChar
  uint32_t set = 0;  // kSet: index into Glob::sets
};

// fnmatch.translate's text of a bracket expression p[i, j) (without the brackets), before its
// regex set syntax is read: backslashes escaped, '-' inside a chunk escaped, empty ranges
// ("z-a") removed.
std::u32string bracket_text(const std::u32string& p, size_t i, size_t j) {
  const std::u32string stuff = p.substr(i, j - i);
  auto escape = [](const std::u32string& s, bool hyphens) {
    std::u32string out;
    for (char32_t c : s) {
      if (c == U'\\' || (hyphens && c == U'-')) out.push_back(U'\\');
      out.push_back(c);
    }
    return out;
  };
  if (stuff.find(U'-') == std::u32string::npos) return escape(stuff, false);
  std::vector<std::u32string> chunks;
  size_t k = p[i] == U'!' ? i + 2 : i + 1;
  for (;;) {
    const size_t at = k < j ? p.find(U'-', k) : std::u32string::npos;
    if (at == std::u32string::npos || at >= j) break;
    chunks.push_back(p.substr(i, at - i));
    i = at + 1;
    k = at + 3;
  }
  if (i < j) {
    chunks.push_back(p.substr(i, j - i));
  } else {
    chunks.back().push_back(U'-');
  }
  for (size_t m = chunks.size() - 1; m > 0; --m) {
    if (!chunks[m - 1].empty() && !chunks[m].empty() && chunks[m - 1].back() > chunks[m][0]) {
      chunks[m - 1] = chunks[m - 1].substr(0, chunks[m - 1].size() - 1) + chunks[m].substr(1);
      chunks.erase(chunks.begin() + static_cast<std::ptrdiff_t>(m));
    }
  }
  std::u32string out;
  for (size_t m = 0; m < chunks.size(); ++m) {
    if (m > 0) out.push_back(U'-');
    out += escape(chunks[m], true);
  }
  return out;
}

// The set a regex class "[text]" stands for, read as Python's re reads it (escapes are
// literal characters, "a-b" a range; '!' first is the negation, fnmatch's '^').
CharSet read_class(const std::u32string& text) {
  CharSet set;
  size_t pos = 0;
  if (text[0] == U'!') {
    set.negated = true;
    pos = 1;
  }
  auto next = [&]() {
    if (text[pos] == U'\\' && pos + 1 < text.size()) {
      pos += 2;
      return text[pos - 1];
    }
    return text[pos++];
  };
  while (pos < text.size()) {
    const char32_t lo = next();
    if (pos + 1 < text.size() && text[pos] == U'-') {
      ++pos;
      const char32_t hi = next();
      if (lo <= hi) set.ranges.emplace_back(lo, hi);  // (fnmatch removed the empty ones)
    } else {
      set.ranges.emplace_back(lo, lo);
    }
  }
  return set;
}

// One pattern component.
struct Glob {
  bool double_star = false;  // "**": any number of components
  bool literal = false;      // no wildcard: compared as it is
  std::string text;          // (literal)
  std::vector<Token> tokens;
  std::vector<CharSet> sets;

  explicit Glob(std::string component) {
    double_star = component == "**";
    literal = component.find_first_of("*?[") == std::string::npos;
    if (literal || double_star) {
      text = std::move(component);
      return;
    }
    const std::u32string p = code_points(component);
    for (size_t i = 0; i < p.size();) {
      const char32_t c = p[i++];
      if (c == U'*') {
        if (tokens.empty() || tokens.back().kind != Token::kStar) tokens.push_back({Token::kStar});
      } else if (c == U'?') {
        tokens.push_back({Token::kAny});
      } else if (c == U'[') {
        size_t j = i;
        if (j < p.size() && p[j] == U'!') ++j;
        if (j < p.size() && p[j] == U']') ++j;
        while (j < p.size() && p[j] != U']') ++j;
        if (j >= p.size()) {
          tokens.push_back({Token::kChar, U'['});
          continue;
        }
        const std::u32string stuff = bracket_text(p, i, j);
        i = j + 1;
        if (stuff.empty()) {
          tokens.push_back({Token::kNever});
        } else if (stuff == U"!") {
          tokens.push_back({Token::kAny});
        } else {
          tokens.push_back({Token::kSet, 0, static_cast<uint32_t>(sets.size())});
          sets.push_back(read_class(stuff));
        }
      } else {
        tokens.push_back({Token::kChar, c});
      }
    }
  }

  bool one(const Token& t, char32_t c) const {
    switch (t.kind) {
      case Token::kChar: return t.c == c;
      case Token::kAny: return true;
      case Token::kSet: return sets[t.set].contains(c);
      default: return false;
    }
  }

  bool match(std::string_view key) const {
    if (literal) return key == text;
    const std::u32string s = code_points(key);
    size_t t = 0, g = 0, star = SIZE_MAX, star_t = 0;
    while (t < s.size()) {
      if (g < tokens.size() && tokens[g].kind == Token::kStar) {
        star = g++;
        star_t = t;
      } else if (g < tokens.size() && one(tokens[g], s[t])) {
        ++g;
        ++t;
      } else if (star != SIZE_MAX) {
        g = star + 1;
        t = ++star_t;
      } else {
        return false;
      }
    }
    while (g < tokens.size() && tokens[g].kind == Token::kStar) ++g;
    return g == tokens.size();
  }
};

using Pattern = std::vector<Glob>;

// Whether `p` from component `pi` matches path[ti...] or a prefix of it, trying each split of
// a "**" in turn: linear with one "**", exponential in their number (prefix_match says when).
bool prefix_match_splits(const Pattern& p, size_t pi, std::span<const std::string> path,
                         size_t ti) {
  if (pi == p.size()) return true;
  if (p[pi].double_star) {
    for (size_t k = ti; k <= path.size(); ++k) {
      if (prefix_match_splits(p, pi + 1, path, k)) return true;
    }
    return false;
  }
  return ti < path.size() && p[pi].match(path[ti]) &&
         prefix_match_splits(p, pi + 1, path, ti + 1);
}

// Whether `p` matches `path` or a prefix of it. With two "**" or more, trying every split
// would take exponential time ("**/a/**/a/.../x" against a deep path of a's): the positions
// in `path` each prefix of the pattern can reach are carried instead, component by component,
// at most (pattern x path) component matches. (Written here: fnmatch has no path patterns.)
bool prefix_match(const Pattern& p, std::span<const std::string> path) {
  const auto stars = std::count_if(p.begin(), p.end(), [](const Glob& g) { return g.double_star; });
  if (stars <= 1) return prefix_match_splits(p, 0, path, 0);
  std::vector<char> reach(path.size() + 1, 0), next(path.size() + 1, 0);
  reach[0] = 1;  // (no component matched yet: at the root)
  for (const Glob& g : p) {
    bool any = false;
    if (g.double_star) {
      char on = 0;
      for (size_t t = 0; t <= path.size(); ++t) {
        on = static_cast<char>(on | reach[t]);
        next[t] = on;
        any = any || on;
      }
    } else {
      next[0] = 0;
      for (size_t t = 0; t < path.size(); ++t) {
        next[t + 1] = static_cast<char>(reach[t] && g.match(path[t]));
        any = any || next[t + 1];
      }
    }
    if (!any) return false;
    reach.swap(next);
  }
  return true;  // (every component matched, ending somewhere: the path or a prefix of it)
}

}  // namespace

bool glob_match(std::string_view glob, std::string_view text) {
  Glob g{std::string(glob)};
  if (g.double_star) g = Glob{"*"};  // (not special for one component: two '*' are one)
  return g.match(text);
}

struct KeyPathPatterns::Compiled {
  std::vector<Pattern> patterns;
};

KeyPathPatterns::KeyPathPatterns(std::unique_ptr<Compiled> c) : c_(std::move(c)) {}
KeyPathPatterns::KeyPathPatterns(KeyPathPatterns&&) noexcept = default;
KeyPathPatterns& KeyPathPatterns::operator=(KeyPathPatterns&&) noexcept = default;
KeyPathPatterns::~KeyPathPatterns() = default;

Result<KeyPathPatterns> KeyPathPatterns::make(const std::vector<std::string>& patterns) {
  auto c = std::make_unique<Compiled>();
  for (const std::string& text : patterns) {
    Result<std::vector<std::string>> parts = split_path(text);
    if (!parts.ok()) {
      return Status::invalid_argument("key-path pattern '" + text + "': " +
                                      parts.status().message());
    }
    Pattern p;
    for (std::string& part : *parts) {
      // ("**/**" is "**": one of them, fewer splits to try.)
      if (part == "**" && !p.empty() && p.back().double_star) continue;
      p.emplace_back(std::move(part));
    }
    c->patterns.push_back(std::move(p));
  }
  return KeyPathPatterns(std::move(c));
}

size_t KeyPathPatterns::size() const { return c_->patterns.size(); }

bool KeyPathPatterns::selects(size_t i, std::span<const std::string> path) const {
  return prefix_match(c_->patterns[i], path);
}

bool KeyPathPatterns::selects(std::span<const std::string> path, std::vector<char>* matched) const {
  bool any = false;
  for (size_t i = 0; i < c_->patterns.size(); ++i) {
    if (matched != nullptr && (*matched)[i] && any) continue;  // (known already)
    if (selects(i, path)) {
      any = true;
      if (matched == nullptr) return true;
      (*matched)[i] = 1;
    }
  }
  return any;
}

bool KeyPathPatterns::may_select_below(std::span<const std::string> path) const {
  for (const Pattern& p : c_->patterns) {
    bool may = true;
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].double_star || i == path.size()) break;
      if (!p[i].match(path[i])) {
        may = false;
        break;
      }
    }
    if (may) return true;
  }
  return false;
}

bool KeyPathPatterns::may_walk_everything() const {
  return std::any_of(c_->patterns.begin(), c_->patterns.end(), [](const Pattern& p) {
    return p.empty() || p[0].double_star || !p[0].literal;
  });
}

}  // namespace jtree
