#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "commands.h"
#include "jtree/io.h"

namespace jtree::cli {

int fail(const std::string& message) {
  std::fprintf(stderr, "jtree: %s\n", message.c_str());
  return 1;
}

int usage_error(const std::string& message, const char* usage) {
  std::fprintf(stderr, "jtree: %s\nusage: %s\n", message.c_str(), usage);
  return 2;
}

int print_help(const char* usage, const char* help) {
  std::printf("usage: %s\n\n%s", usage, help);
  return 0;
}

OpenOptions open_options(const CommonFlags& f) {
  OpenOptions o;
  o.remote = f.remote;
  return o;
}

namespace {

// A whole decimal number in [lo, hi], else false with `error` naming the flag.
template <typename T>
bool parse_number(const std::string& flag, const std::string& v, T lo, T hi, T* out,
                  std::string* error) {
  T n{};
  auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (err != std::errc() || end != v.data() + v.size() || n < lo || n > hi) {
    *error = flag + " takes a number from " + std::to_string(lo) + " to " + std::to_string(hi) +
             ", not '" + v + "'";
    return false;
  }
  *out = n;
  return true;
}

// One remote flag (kRemoteHelp) with its value, into `r`; false when `flag` is none of them,
// or (with `error` set) when its value is bad.
bool parse_remote_flag(const std::string& flag, const std::function<bool(std::string*)>& value,
                       RemoteOptions* r, std::string* error, bool* matched) {
  *matched = true;
  std::string v;
  auto number = [&](auto* out, auto lo, auto hi) {
    return value(&v) && parse_number(flag, v, lo, hi, out, error);
  };
  if (flag == "--allow-full-download") { r->http.allow_full_download = true; return true; }
  if (flag == "--no-verify-tls") { r->http.verify_tls = false; return true; }
  if (flag == "--endpoint") return value(&r->s3.endpoint);
  if (flag == "--region") return value(&r->s3.region);
  if (flag == "--profile") return value(&r->s3.profile);
  if (flag == "--ca-file") return value(&r->http.ca_file);
  if (flag == "--header") {
    if (!value(&v)) return false;
    r->http.http_headers.push_back(v);
    return true;
  }
  if (flag == "--addressing") {
    if (!value(&v)) return false;
    if (v == "auto") r->s3.addressing = S3Addressing::kAuto;
    else if (v == "path") r->s3.addressing = S3Addressing::kPath;
    else if (v == "virtual") r->s3.addressing = S3Addressing::kVirtual;
    else *error = "--addressing takes auto, path or virtual, not '" + v + "'";
    return error->empty();
  }
  if (flag == "--concurrency") return number(&r->http.max_concurrency, 1, 1024);
  if (flag == "--retries") return number(&r->http.max_retries, 0, 1000);
  if (flag == "--part-size") {
    return number(&r->s3.part_size, uint64_t{5} << 20, uint64_t{5} << 30);
  }
  if (flag == "--timeout" || flag == "--connect-timeout") {
    int seconds = 0;
    if (!number(&seconds, 1, 86400)) return false;
    (flag == "--timeout" ? r->http.deadline_seconds : r->http.connect_timeout_seconds) = seconds;
    return true;
  }
  *matched = false;
  return false;
}

}  // namespace

bool parse_flags(const Args& args, CommonFlags* f, std::string* error, bool remote_flags) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) {
        *error = a + " needs a value";
        return false;
      }
      *out = args[++i];
      return true;
    };
    if (a == "--json") {
      f->json = true;
    } else if (a == "-q" || a == "--quiet") {
      f->quiet = true;
    } else if (a == "--no-verify") {
      f->verify = false;
    } else if (a == "-h" || a == "--help") {
      f->help = true;
    } else if (a == "--threads") {
      std::string v;
      if (!value(&v)) return false;
      f->threads = std::atoi(v.c_str());
    } else if (a == "-o" || a == "--output") {
      if (!value(&f->output)) return false;
    } else if (a.size() > 1 && a[0] == '-' && a != "-") {
      bool matched = false;
      const bool ok = remote_flags && parse_remote_flag(a, value, &f->remote, error, &matched);
      if (!matched) *error = "unknown option " + a;
      if (!ok) return false;
      // (--allow-full-download, which acts only when a server ignores Range, is accepted for
      // local files too, as it always was.)
      if (a != "--allow-full-download") f->remote_set = true;
    } else {
      f->positional.push_back(a);
    }
  }
  if (!f->remote_set) return true;
  // The library's rule for the values together (a header that is not "Name: value"...).
  const Status st = check_remote_options(f->remote);
  if (!st.ok()) {
    *error = st.message();
    return false;
  }
  const bool any_url = std::any_of(f->positional.begin(), f->positional.end(),
                                   [](const std::string& p) { return !is_local_path(p); });
  if (!any_url && !f->help) {
    *error = "the remote options (--endpoint, --concurrency...) apply to http(s):// and s3:// "
             "URLs, and none is given";
    return false;
  }
  return true;
}

}  // namespace jtree::cli
