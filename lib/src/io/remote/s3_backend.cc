// The s3:// backend's registration (backend.h). Its pieces: s3_source.cc (reads, listing,
// deletion), s3_sink.cc (new objects and appends), s3_stale_uploads.cc (cleanup), over
// s3_client.cc / s3_config.cc / sigv4.cc / s3_xml.cc.
#include "io/remote/remote_backends.h"
#include "io/remote/remote_io.h"
#include "io/remote/s3_client.h"

namespace jtree::remote {
namespace {

Result<std::shared_ptr<Source>> open(std::string_view url, const OpenOptions& options) {
  return open_s3_source(url, options.remote);
}

Status remove(std::string_view url, const RemoteOptions& options) {
  return remove_s3_object(url, options);
}

Result<ObjectInfo> stat(std::string_view url, const RemoteOptions& options) {
  JTREE_ASSIGN_OR_RETURN(S3Location loc, parse_s3_url(url));
  auto config = resolve_s3_config(options, Environment::process());
  if (!config.ok()) return config.status().with_prefix(std::string(url));
  S3Client client(std::move(*config), options);
  return client.head(loc);
}

}  // namespace

const io::Backend& s3_backend() {
  static const io::Backend b = [] {
    io::Backend s;
    s.name = "s3";
    s.schemes = {"s3"};
    s.open_source = open;
    s.create_sink = create_s3_sink;
    s.open_append_sink = open_s3_append_sink;
    s.remove_object = remove;
    s.remove_stale = abort_incomplete_uploads;
    s.stat = stat;
    return s;
  }();
  return b;
}

}  // namespace jtree::remote
