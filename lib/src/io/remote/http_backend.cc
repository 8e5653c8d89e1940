// The http(s):// backend's registration (backend.h): range reads of any URL. Writing,
// appending and deleting are refused, saying where writes can go.
#include "io/remote/remote_backends.h"
#include "io/remote/remote_io.h"

namespace jtree::remote {
namespace {

Result<std::shared_ptr<Source>> open(std::string_view url, const OpenOptions& options) {
  return open_http_source(url, options.remote);
}

Result<std::unique_ptr<Sink>> create(std::string_view url, const SinkOptions&) {
  return Status::not_supported(std::string(url) +
                              ": writing over http(s) is not supported; write to s3:// or a "
                              "local path");
}

Result<std::unique_ptr<Sink>> append(std::string_view url, uint64_t, const SinkOptions&,
                                     std::string_view) {
  return Status::not_supported(std::string(url) +
                              ": appending needs a local file or an s3:// object");
}

Status remove(std::string_view url, const RemoteOptions&) {
  return Status::not_supported(std::string(url) + ": removing http(s) objects is not supported");
}

// The size from a one-byte range GET (HEAD is often refused by signed or presigned URLs, and
// a GET tells the same).
Result<ObjectInfo> stat(std::string_view url, const RemoteOptions& options) {
  JTREE_ASSIGN_OR_RETURN(std::shared_ptr<Source> src, open_http_source(url, options));
  JTREE_ASSIGN_OR_RETURN(uint64_t size, src->size());
  return ObjectInfo{std::string(url), size, src->etag()};
}

}  // namespace

const io::Backend& http_backend() {
  static const io::Backend b = [] {
    io::Backend h;
    h.name = "http(s)";
    h.schemes = {"http", "https"};
    h.open_source = open;
    h.create_sink = create;
    h.open_append_sink = append;
    h.remove_object = remove;
    h.stat = stat;
    return h;
  }();
  return b;
}

}  // namespace jtree::remote
