// jtree.RemoteOptions (python/jtree/_remote.py) as jtree::RemoteOptions: the Python class
// hands over a dict of the fields it sets; each name maps to one field here, and the library
// checks the values (jtree::check_remote_options).
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "common.h"
#include "jtree/io.h"
#include "jtree/remote.h"

namespace jtpy {
namespace {

// A size or count from a Python int: negative ones are refused naming the field (not left to
// nanobind's unsigned conversion, whose error names no field).
uint64_t unsigned_field(nb::handle v, const std::string& name) {
  const int64_t i = nb::cast<int64_t>(v);
  if (i < 0) {
    check(jtree::Status::invalid_argument("RemoteOptions." + name + " must be >= 0, not " +
                                         std::to_string(i)));
  }
  return static_cast<uint64_t>(i);
}

jtree::S3Addressing addressing_field(nb::handle v) {
  const std::string s = nb::cast<std::string>(v);
  if (s == "auto") return jtree::S3Addressing::kAuto;
  if (s == "path") return jtree::S3Addressing::kPath;
  if (s == "virtual") return jtree::S3Addressing::kVirtual;
  check(jtree::Status::invalid_argument("RemoteOptions.addressing must be \"auto\", \"path\" or "
                                       "\"virtual\", not \"" + s + "\""));
  return jtree::S3Addressing::kAuto;
}

// One field of jtree::RemoteOptions by its Python name.
void set_field(jtree::RemoteOptions& o, const std::string& name, nb::handle v) {
  jtree::HttpOptions& h = o.http;
  jtree::S3Options& s = o.s3;
  // s3:// settings
  if (name == "endpoint") s.endpoint = nb::cast<std::string>(v);
  else if (name == "region") s.region = nb::cast<std::string>(v);
  else if (name == "profile") s.profile = nb::cast<std::string>(v);
  else if (name == "access_key_id") s.access_key_id = nb::cast<std::string>(v);
  else if (name == "secret_access_key") s.secret_access_key = nb::cast<std::string>(v);
  else if (name == "session_token") s.session_token = nb::cast<std::string>(v);
  else if (name == "addressing") s.addressing = addressing_field(v);
  else if (name == "part_size") s.part_size = unsigned_field(v, name);
  else if (name == "upload_concurrency") s.upload_concurrency = nb::cast<int>(v);
  // every transfer
  else if (name == "max_retries") h.max_retries = nb::cast<int>(v);
  else if (name == "deadline") h.deadline_seconds = nb::cast<double>(v);
  else if (name == "connect_timeout") h.connect_timeout_seconds = nb::cast<double>(v);
  else if (name == "stall_timeout") h.stall_timeout_seconds = nb::cast<double>(v);
  else if (name == "backoff_initial") h.backoff_initial_seconds = nb::cast<double>(v);
  else if (name == "backoff_max") h.backoff_max_seconds = nb::cast<double>(v);
  else if (name == "max_concurrency") h.max_concurrency = nb::cast<int>(v);
  else if (name == "coalesce_gap") h.coalesce_gap = unsigned_field(v, name);
  else if (name == "max_request_bytes") h.max_request_bytes = unsigned_field(v, name);
  else if (name == "fetch_bytes") h.fetch_bytes = unsigned_field(v, name);
  else if (name == "verify_tls") h.verify_tls = nb::cast<bool>(v);
  else if (name == "ca_file") h.ca_file = nb::cast<std::string>(v);
  else if (name == "ca_path") h.ca_path = nb::cast<std::string>(v);
  else if (name == "http2") h.http2 = nb::cast<bool>(v);
  else if (name == "http_headers") {
    h.http_headers.clear();
    for (nb::handle line : v) h.http_headers.push_back(nb::cast<std::string>(line));
  } else if (name == "allow_full_download") h.allow_full_download = nb::cast<bool>(v);
  else if (name == "full_download_max_bytes") h.full_download_max_bytes = unsigned_field(v, name);
  else check(jtree::Status::invalid_argument("RemoteOptions has no setting '" + name + "'"));
}

jtree::RemoteOptions from_dict(nb::handle settings) {
  jtree::RemoteOptions o;
  for (auto [k, v] : nb::cast<nb::dict>(settings)) set_field(o, nb::cast<std::string>(k), v);
  check(jtree::check_remote_options(o));
  return o;
}

}  // namespace

jtree::RemoteOptions remote_options(nb::handle settings, const std::string& path) {
  if (settings.is_none()) return {};
  // Remote settings name a remote object: for a local file they would be silently unused.
  if (jtree::is_local_path(path)) {
    check(jtree::Status::invalid_argument(
        path + ": remote= applies to http(s):// and s3:// URLs; this is a local file"));
  }
  return from_dict(settings);
}

void register_remote_options(nb::module_& m) {
  m.def(
      "check_remote_options", [](nb::dict settings) { (void)from_dict(settings); },
      nb::arg("settings"),
      "Raises InvalidArgumentError for an unknown setting or an unusable value "
      "(jtree::check_remote_options); settings: {RemoteOptions field: value}.");
}

}  // namespace jtpy
