// Where an S3 request goes and who signs it: s3:// URLs, the credential chain (options,
// environment, shared credentials/config files), region, endpoint and addressing.
// The environment is passed in, so the resolution is testable (and the INI parser fuzzable).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "jtree/remote.h"
#include "jtree/status.h"

namespace jtree::remote {

/// "s3://bucket/key" split. The key is taken literally (no percent-decoding), as boto3 does.
struct S3Location {
  std::string bucket;
  std::string key;  ///< may be empty (a bucket or a prefix, for listing)
  std::string url() const { return "s3://" + bucket + "/" + key; }
};

/// Parses an s3:// URL. InvalidArgument: another scheme, an empty or invalid bucket name
/// (S3's rules: 3-63 of a-z 0-9 . -), or an empty key when `need_key`.
Result<S3Location> parse_s3_url(std::string_view url, bool need_key = true);

/// Sections of an AWS shared credentials or config file: section -> key -> value. In a config
/// file "[profile x]" is section "x" ("[default]" stays "default", "[services x]" stays
/// "services x": a profile named "services x" would share its section). Nested settings
/// ("s3 =" followed by indented "addressing_style = path") become "s3.addressing_style".
/// Comments (# ;) and malformed lines are skipped. At most 1 MiB of text is read.
using IniSections = std::map<std::string, std::map<std::string, std::string>>;
IniSections parse_aws_ini(std::string_view text, bool config_file);

/// What the resolution reads: environment variables and files (the process's by default).
struct Environment {
  std::function<std::optional<std::string>(const std::string& name)> getenv;
  std::function<std::optional<std::string>(const std::string& path)> read_file;
  /// The process's environment and file system.
  static Environment process();
};

/// A resolved S3 configuration.
struct S3Config {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string credential_source;  ///< for messages: "environment", "profile x (~/.aws/...)"...
  std::string region;
  std::string scheme;        ///< "https" or "http"
  std::string endpoint_host; ///< "s3.us-east-1.amazonaws.com", "127.0.0.1:7480" (port kept)
  std::string base_path;     ///< a custom endpoint's path prefix ("" or "/prefix")
  bool custom_endpoint = false;
  S3Addressing addressing = S3Addressing::kAuto;  ///< kAuto, kPath or kVirtual as configured
  std::string ca_file;       ///< from options / AWS_CA_BUNDLE (empty: the HTTP defaults)

  bool anonymous() const { return access_key_id.empty(); }
};

/// Resolves credentials, region, endpoint and addressing (precedence in jtree/remote.h).
/// InvalidArgument for an unusable endpoint URL or a key id without its secret.
Result<S3Config> resolve_s3_config(const RemoteOptions& options, const Environment& env);

/// Where one request for `bucket`/`key` goes.
struct S3Target {
  std::string url_prefix;     ///< "https://bucket.s3.us-east-1.amazonaws.com" (no path)
  std::string host;           ///< the Host header, as signed
  std::string canonical_uri;  ///< "/bucket/my%20key" or "/my%20key": the encoded path
};

/// The target for a bucket (and key; empty for bucket-level calls), following the addressing.
S3Target s3_target(const S3Config& config, std::string_view bucket, std::string_view key);

}  // namespace jtree::remote
