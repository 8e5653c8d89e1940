#include "cli_util.h"

#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstring>

namespace jtree::cli {

std::string human_bytes(uint64_t n) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (n < 1024) return std::to_string(n) + " B";
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v,
                units[u]);
  return buf;
}

std::string shape_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::string ratio_string(uint64_t stored, uint64_t raw) {
  if (raw == 0) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(stored) / raw);
  return buf;
}

bool stderr_is_tty() { return isatty(STDERR_FILENO) == 1; }

// ---- Progress ---------------------------------------------------------------------------------

Progress::Progress(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled && stderr_is_tty()) {
  start_ = last_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { finish(); }

ProgressFn Progress::fn() {
  return [this](uint64_t done, uint64_t total) {
    done_ = done;
    total_ = total;
    auto now = std::chrono::steady_clock::now();
    // Nothing for the first half second (quick operations stay quiet), then 10 redraws/s.
    if (now - start_ > std::chrono::milliseconds(500) &&
        now - last_ > std::chrono::milliseconds(100)) {
      last_ = now;
      draw(done, total, false);
    }
    return true;
  };
}

void Progress::draw(uint64_t done, uint64_t total, bool final) {
  if (!enabled_) return;
  const double frac = total ? static_cast<double>(done) / total : 1.0;
  const int width = 30;
  int filled = static_cast<int>(frac * width);
  std::string bar(filled, '#');
  bar.resize(width, '.');
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string rate = secs > 0 ? human_bytes(static_cast<uint64_t>(done / secs)) + "/s" : "";
  std::fprintf(stderr, "\r%s [%s] %5.1f%% %s / %s  %s\033[K%s", label_.c_str(), bar.c_str(),
               frac * 100, human_bytes(done).c_str(), human_bytes(total).c_str(), rate.c_str(),
               final ? "\n" : "");
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (drawn_) {
    draw(total_, total_, true);
    drawn_ = false;
  }
}

// ---- Json -------------------------------------------------------------------------------------

void Json::comma() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

Json& Json::begin_object() {
  comma();
  out_ += '{';
  first_.push_back(true);
  return *this;
}
Json& Json::end_object() {
  out_ += '}';
  first_.pop_back();
  return *this;
}
Json& Json::begin_array() {
  comma();
  out_ += '[';
  first_.push_back(true);
  return *this;
}
Json& Json::end_array() {
  out_ += ']';
  first_.pop_back();
  return *this;
}
Json& Json::key(std::string_view k) {
  str(k);
  out_ += ':';
  after_key_ = true;
  return *this;
}
Json& Json::str(std::string_view v) {
  comma();
  out_ += '"';
  for (unsigned char c : v) {
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out_ += buf;
        } else {
          out_ += static_cast<char>(c);
        }
    }
  }
  out_ += '"';
  return *this;
}
Json& Json::num(uint64_t v) {
  comma();
  out_ += std::to_string(v);
  return *this;
}
Json& Json::num(int64_t v) {
  comma();
  out_ += std::to_string(v);
  return *this;
}
Json& Json::num(double v) {
  comma();
  if (!std::isfinite(v)) {
    out_ += "null";  // JSON has no NaN/inf
  } else {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out_ += buf;
  }
  return *this;
}
Json& Json::shape(const Shape& s) {
  begin_array();
  for (uint64_t d : s) num(d);
  return end_array();
}
Json& Json::boolean(bool v) {
  comma();
  out_ += v ? "true" : "false";
  return *this;
}
Json& Json::null() {
  comma();
  out_ += "null";
  return *this;
}

// ---- key[slice] -------------------------------------------------------------------------------

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

Result<std::optional<int64_t>> parse_int(std::string_view s, std::string_view whole) {
  s = trim(s);
  if (s.empty()) return std::optional<int64_t>();
  char* end = nullptr;
  std::string tmp(s);
  errno = 0;
  long long v = std::strtoll(tmp.c_str(), &end, 10);
  if (errno != 0 || end != tmp.c_str() + tmp.size()) {
    return Status::invalid_argument("bad number '" + tmp + "' in slice '" + std::string(whole) + "'");
  }
  return std::optional<int64_t>(v);
}

}  // namespace

Result<SliceSpec> parse_key_slice(std::string_view arg) {
  SliceSpec spec;
  // The slice is a trailing [...] not escaped by '\'.
  size_t open = std::string_view::npos;
  if (!arg.empty() && arg.back() == ']') {
    for (size_t i = arg.size(); i-- > 0;) {
      if (arg[i] == '[' && (i == 0 || arg[i - 1] != '\\')) {
        open = i;
        break;
      }
    }
    if (open == std::string_view::npos) {
      return Status::invalid_argument("unbalanced ']' in '" + std::string(arg) + "'");
    }
  }
  spec.path = std::string(arg.substr(0, open == std::string_view::npos ? arg.size() : open));
  if (open == std::string_view::npos) return spec;
  std::string_view body = arg.substr(open + 1, arg.size() - open - 2);
  if (trim(body).empty()) return spec;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    std::string_view part = body.substr(pos, comma == std::string_view::npos ? body.npos : comma - pos);
    SliceSpec::Dim dim;
    size_t colon = part.find(':');
    if (part.find(':', colon == part.npos ? part.npos : colon + 1) != part.npos) {
      return Status::invalid_argument("slice steps are not supported: '" + std::string(part) + "'");
    }
    if (colon == part.npos) {
      JTREE_ASSIGN_OR_RETURN(dim.start, parse_int(part, arg));
      if (!dim.start) return Status::invalid_argument("empty index in '" + std::string(arg) + "'");
      dim.index = true;
    } else {
      JTREE_ASSIGN_OR_RETURN(dim.start, parse_int(part.substr(0, colon), arg));
      JTREE_ASSIGN_OR_RETURN(dim.stop, parse_int(part.substr(colon + 1), arg));
    }
    spec.dims.push_back(dim);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return spec;
}

Result<Box> resolve_slice(const SliceSpec& spec, const Shape& shape, Shape* out_shape) {
  // The text is parsed here; what it selects is jtree::resolve_index's decision (the Python
  // LazyArray resolves its indices with the same function).
  std::vector<IndexItem> items;
  items.reserve(spec.dims.size());
  for (const SliceSpec::Dim& dim : spec.dims) {
    IndexItem item;
    item.kind = dim.index ? IndexItem::Kind::kInt : IndexItem::Kind::kSlice;
    item.start = dim.start;
    if (!dim.index) item.stop = dim.stop;
    items.push_back(item);
  }
  JTREE_ASSIGN_OR_RETURN(ResolvedIndex resolved, resolve_index(items, shape));
  *out_shape = std::move(resolved.shape);
  return std::move(resolved.box);
}

}  // namespace jtree::cli
