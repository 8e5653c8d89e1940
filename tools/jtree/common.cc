#include <cstdio>
#include <cstdlib>

#include "commands.h"

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
  o.remote.http.allow_full_download = f.allow_full_download;
  return o;
}

bool parse_flags(const Args& args, CommonFlags* f, std::string* error) {
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
    } else if (a == "--allow-full-download") {
      f->allow_full_download = true;
    } else if (a == "--threads") {
      std::string v;
      if (!value(&v)) return false;
      f->threads = std::atoi(v.c_str());
    } else if (a == "-o" || a == "--output") {
      if (!value(&f->output)) return false;
    } else if (a.size() > 1 && a[0] == '-' && a != "-") {
      *error = "unknown option " + a;
      return false;
    } else {
      f->positional.push_back(a);
    }
  }
  return true;
}

}  // namespace jtree::cli
