// http(s):// objects: plain (unsigned) range requests to the URL, redirects followed.
#include "io/backend.h"
#include "io/remote/remote_io.h"
#include "io/remote/remote_source.h"

namespace jtree::remote {
namespace {

class HttpEndpoint final : public ObjectEndpoint {
 public:
  HttpEndpoint(std::string url, const HttpOptions& o) : url_(std::move(url)) {
    transport_.connect_timeout_seconds = o.connect_timeout_seconds;
    transport_.stall_timeout_seconds = o.stall_timeout_seconds;
    transport_.verify_tls = o.verify_tls;
    transport_.ca_file = o.ca_file;
    transport_.ca_path = o.ca_path;
    transport_.http2 = o.http2;
    transport_.follow_redirects = true;
    headers_ = o.http_headers;
  }
  const std::string& name() const override { return url_; }
  Status prepare(HttpRequest& req) const override {
    req.url = url_;
    req.headers.insert(req.headers.end(), headers_.begin(), headers_.end());
    return Status::success();
  }
  const Transport& transport() const override { return transport_; }

 private:
  std::string url_;
  Transport transport_;
  std::vector<std::string> headers_;
};

}  // namespace

Result<std::shared_ptr<Source>> open_http_source(std::string_view url,
                                                 const RemoteOptions& options,
                                                 std::string expected_etag) {
  std::string_view scheme, rest;
  if (!io::split_scheme(url, &scheme, &rest) ||
      !(io::iequals(scheme, "http") || io::iequals(scheme, "https"))) {
    return Status::invalid_argument(std::string(url) + ": not an http(s):// URL");
  }
  if (url.find_first_of(" \r\n") != std::string_view::npos) {
    return Status::invalid_argument(std::string(url) + ": spaces and line breaks must be "
                                   "percent-encoded in URLs");
  }
  std::shared_ptr<Source> s = std::make_shared<RemoteSource>(
      std::make_unique<HttpEndpoint>(std::string(url), options.http), options.http,
      std::move(expected_etag));
  return s;
}

}  // namespace jtree::remote
