#include "io/remote/s3_config.h"

#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "io/remote/sigv4.h"

namespace jtree::remote {
namespace {

constexpr size_t kMaxIniBytes = 1u << 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool valid_bucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) {
      // Older buckets may have upper case and '_' (us-east-1 legacy names): allowed for
      // path-style requests.
      if (!((c >= 'A' && c <= 'Z') || c == '_')) return false;
    }
  }
  return true;
}

// A bucket name usable as a DNS label in a virtual-hosted URL (no dots over https: the
// wildcard certificate covers one label only).
bool dns_compatible(std::string_view b, bool https) {
  if (b.size() < 3 || b.size() > 63) return false;
  if (b.front() == '-' || b.back() == '-' || b.front() == '.' || b.back() == '.') return false;
  for (char c : b) {
    if (c == '.' && https) return false;
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-')) return false;
  }
  return true;
}

std::string home_dir(const Environment& env) {
  if (auto h = env.getenv("HOME"); h && !h->empty()) return *h;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
    return pw->pw_dir;
  }
  return "";
}

std::optional<std::string> nonempty(std::optional<std::string> v) {
  if (v && v->empty()) return std::nullopt;
  return v;
}

const std::string* lookup(const IniSections& s, const std::string& section,
                          const std::string& key) {
  auto it = s.find(section);
  if (it == s.end()) return nullptr;
  auto kv = it->second.find(key);
  return kv == it->second.end() || kv->second.empty() ? nullptr : &kv->second;
}

// True for boto3's true ("true" in any case), as botocore's ensure_boolean reads it.
bool ini_true(std::string_view v) {
  if (v.size() != 4) return false;
  std::string lower(v);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return lower == "true";
}

// The endpoint URL for S3, in botocore's order (the AWS SDKs' "service-specific endpoints"):
// the options (code), AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's `services`
// section's `s3 = endpoint_url`, the profile's own `s3 = endpoint_url` (the
// awscli-plugin-endpoint form, which jtree read before), the profile's `endpoint_url`.
// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS (else the profile's ignore_configured_endpoint_urls)
// set to true skips all but the options. Empty: AWS's regional endpoint.
std::string configured_endpoint(const RemoteOptions& o, const Environment& env,
                                const IniSections& config_file, const std::string& profile) {
  if (!o.s3.endpoint.empty()) return o.s3.endpoint;
  // The environment's switch wins over the profile's, set or not (as in botocore).
  bool ignore = false;
  if (auto v = env.getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")) {
    ignore = ini_true(*v);
  } else if (const std::string* p =
                 lookup(config_file, profile, "ignore_configured_endpoint_urls")) {
    ignore = ini_true(*p);
  }
  if (ignore) return "";
  if (auto e = nonempty(env.getenv("AWS_ENDPOINT_URL_S3"))) return *e;
  if (auto e = nonempty(env.getenv("AWS_ENDPOINT_URL"))) return *e;
  if (const std::string* services = lookup(config_file, profile, "services")) {
    if (const std::string* e = lookup(config_file, "services " + *services, "s3.endpoint_url")) {
      return *e;
    }
  }
  if (const std::string* e = lookup(config_file, profile, "s3.endpoint_url")) return *e;
  if (const std::string* e = lookup(config_file, profile, "endpoint_url")) return *e;
  return "";
}

}  // namespace

Result<S3Location> parse_s3_url(std::string_view url, bool need_key) {
  constexpr std::string_view kScheme = "s3://";
  if (url.size() < kScheme.size() || url.substr(0, kScheme.size()) != kScheme) {
    return Status::invalid_argument(std::string(url) + ": not an s3:// URL");
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  S3Location loc;
  loc.bucket = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) loc.key = std::string(rest.substr(slash + 1));
  if (!valid_bucket(loc.bucket)) {
    return Status::invalid_argument(std::string(url) + ": invalid bucket name \"" + loc.bucket +
                                   "\"");
  }
  if (need_key && loc.key.empty()) {
    return Status::invalid_argument(std::string(url) + ": no object key after the bucket name");
  }
  return loc;
}

IniSections parse_aws_ini(std::string_view text, bool config_file) {
  IniSections out;
  text = text.substr(0, kMaxIniBytes);
  std::string section;
  bool in_section = false;
  std::string nested;  // the open "s3 =" block, if any
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view raw = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const bool indented = !raw.empty() && (raw[0] == ' ' || raw[0] == '\t');
    std::string_view line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      nested.clear();
      if (line.back() != ']') {
        in_section = false;
        continue;
      }
      std::string_view name = trim(line.substr(1, line.size() - 2));
      if (config_file && name.substr(0, 8) == "profile ") name = trim(name.substr(8));
      section = std::string(name);
      in_section = true;
      out[section];
      continue;
    }
    if (!in_section) continue;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string key(trim(line.substr(0, eq)));
    const std::string value(trim(line.substr(eq + 1)));
    if (key.empty()) continue;
    if (indented && !nested.empty()) {
      out[section][nested + "." + key] = value;
    } else if (value.empty()) {
      nested = key;  // the start of a nested block
    } else {
      nested.clear();
      out[section][key] = value;
    }
  }
  return out;
}

Environment Environment::process() {
  Environment env;
  env.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  env.read_file = [](const std::string& path) -> std::optional<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::string text;
    text.resize(kMaxIniBytes);
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    return text;
  };
  return env;
}

Result<S3Config> resolve_s3_config(const RemoteOptions& o, const Environment& env) {
  S3Config c;
  const bool explicit_profile = !o.s3.profile.empty();
  const std::string profile =
      explicit_profile ? o.s3.profile : nonempty(env.getenv("AWS_PROFILE")).value_or("default");
  const std::string home = home_dir(env);
  const std::string cred_path = nonempty(env.getenv("AWS_SHARED_CREDENTIALS_FILE"))
                                    .value_or(home + "/.aws/credentials");
  const std::string config_path =
      nonempty(env.getenv("AWS_CONFIG_FILE")).value_or(home + "/.aws/config");
  IniSections creds_file, config_file;
  if (auto t = env.read_file(cred_path)) creds_file = parse_aws_ini(*t, false);
  if (auto t = env.read_file(config_path)) config_file = parse_aws_ini(*t, true);

  // Credentials: the options, the environment (unless a profile was named explicitly, as
  // botocore does), the credentials file, the config file.
  if (!o.s3.access_key_id.empty() || !o.s3.secret_access_key.empty()) {
    c.access_key_id = o.s3.access_key_id;
    c.secret_access_key = o.s3.secret_access_key;
    c.session_token = o.s3.session_token;
    c.credential_source = "options";
  } else if (auto id = nonempty(env.getenv("AWS_ACCESS_KEY_ID")); id && !explicit_profile) {
    c.access_key_id = *id;
    c.secret_access_key = nonempty(env.getenv("AWS_SECRET_ACCESS_KEY")).value_or("");
    c.session_token = nonempty(env.getenv("AWS_SESSION_TOKEN")).value_or("");
    c.credential_source = "environment (AWS_ACCESS_KEY_ID)";
  } else {
    for (const auto& [file, path] : {std::pair{&creds_file, &cred_path},
                                     std::pair{&config_file, &config_path}}) {
      const std::string* key_id = lookup(*file, profile, "aws_access_key_id");
      if (key_id == nullptr) continue;
      c.access_key_id = *key_id;
      const std::string* secret = lookup(*file, profile, "aws_secret_access_key");
      const std::string* token = lookup(*file, profile, "aws_session_token");
      c.secret_access_key = secret ? *secret : "";
      c.session_token = token ? *token : "";
      c.credential_source = "profile \"" + profile + "\" in " + *path;
      break;
    }
  }
  if (c.access_key_id.empty()) {
    c.credential_source = "none found (anonymous requests)";
  } else if (c.secret_access_key.empty()) {
    return Status::invalid_argument("S3 credentials from " + c.credential_source +
                                   ": an access key id without a secret access key");
  }

  // Region.
  if (!o.s3.region.empty()) {
    c.region = o.s3.region;
  } else if (auto r = nonempty(env.getenv("AWS_REGION"))) {
    c.region = *r;
  } else if (auto r2 = nonempty(env.getenv("AWS_DEFAULT_REGION"))) {
    c.region = *r2;
  } else if (const std::string* r3 = lookup(config_file, profile, "region")) {
    c.region = *r3;
  } else {
    c.region = "us-east-1";
  }

  // Endpoint.
  const std::string endpoint = configured_endpoint(o, env, config_file, profile);
  if (endpoint.empty()) {
    c.scheme = "https";
    c.endpoint_host = "s3." + c.region + ".amazonaws.com";
  } else {
    const size_t sep = endpoint.find("://");
    if (sep == std::string::npos) {
      return Status::invalid_argument("S3 endpoint \"" + endpoint +
                                     "\": expected http://host[:port] or https://host[:port]");
    }
    c.scheme = endpoint.substr(0, sep);
    for (char& ch : c.scheme) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (c.scheme != "http" && c.scheme != "https") {
      return Status::invalid_argument("S3 endpoint \"" + endpoint + "\": scheme must be http(s)");
    }
    std::string rest = endpoint.substr(sep + 3);
    const size_t slash = rest.find('/');
    c.endpoint_host = rest.substr(0, slash);
    if (slash != std::string::npos) c.base_path = rest.substr(slash);
    while (!c.base_path.empty() && c.base_path.back() == '/') c.base_path.pop_back();
    // A default port is not part of the Host header (nor of what is signed).
    const std::string default_port = c.scheme == "https" ? ":443" : ":80";
    if (c.endpoint_host.size() > default_port.size() &&
        c.endpoint_host.ends_with(default_port)) {
      c.endpoint_host.resize(c.endpoint_host.size() - default_port.size());
    }
    if (c.endpoint_host.empty()) {
      return Status::invalid_argument("S3 endpoint \"" + endpoint + "\": no host");
    }
    c.custom_endpoint = true;
  }

  // Addressing: the options, else the profile's s3.addressing_style.
  c.addressing = o.s3.addressing;
  if (c.addressing == S3Addressing::kAuto) {
    if (const std::string* a = lookup(config_file, profile, "s3.addressing_style")) {
      if (*a == "path") c.addressing = S3Addressing::kPath;
      if (*a == "virtual") c.addressing = S3Addressing::kVirtual;
    }
  }

  c.ca_file = o.http.ca_file;
  if (c.ca_file.empty()) c.ca_file = nonempty(env.getenv("AWS_CA_BUNDLE")).value_or("");
  return c;
}

S3Target s3_target(const S3Config& config, std::string_view bucket, std::string_view key) {
  bool virtual_host = false;
  switch (config.addressing) {
    case S3Addressing::kPath: break;
    case S3Addressing::kVirtual: virtual_host = !bucket.empty(); break;
    case S3Addressing::kAuto:
      virtual_host = !config.custom_endpoint && dns_compatible(bucket, config.scheme == "https");
      break;
  }
  S3Target t;
  t.host = virtual_host ? std::string(bucket) + "." + config.endpoint_host : config.endpoint_host;
  t.url_prefix = config.scheme + "://" + t.host;
  std::string path = config.base_path;
  if (!virtual_host && !bucket.empty()) path += "/" + std::string(bucket);
  // Bucket-level calls (ListObjectsV2) name the bucket alone: "/bucket", or "/" when virtual.
  if (!key.empty() || path.empty()) path += "/" + std::string(key);
  t.canonical_uri = uri_encode(path, true);
  return t;
}

}  // namespace jtree::remote
