// s3:// objects for reading (RemoteSource with signed requests), and the S3 calls of
// jtree/remote.h: list_objects, delete_object (stat_object goes through the backend table).
#include <ctime>
#include <memory>

#include "io/backend.h"
#include "io/remote/remote_io.h"
#include "io/remote/remote_source.h"
#include "io/remote/s3_client.h"
#include "io/remote/sigv4.h"

namespace jtree::remote {
namespace {

class S3Endpoint final : public ObjectEndpoint {
 public:
  S3Endpoint(S3Location loc, S3Config config, const HttpOptions& o)
      : loc_(std::move(loc)), name_(loc_.url()), config_(std::move(config)) {
    transport_.connect_timeout_seconds = o.connect_timeout_seconds;
    transport_.stall_timeout_seconds = o.stall_timeout_seconds;
    transport_.verify_tls = o.verify_tls;
    transport_.ca_file = config_.ca_file;
    transport_.ca_path = o.ca_path;
    transport_.http2 = o.http2;
  }
  const std::string& name() const override { return name_; }
  Status prepare(HttpRequest& req) const override {
    prepare_s3_request(config_, loc_.bucket, loc_.key, {}, std::string(kEmptySha256), req,
                       static_cast<int64_t>(std::time(nullptr)));
    return Status::success();
  }
  Failure map_error(const Attempt& a, const std::string& what) const override {
    return s3_failure(a, what, config_, loc_);
  }
  const Transport& transport() const override { return transport_; }

 private:
  S3Location loc_;
  std::string name_;
  S3Config config_;
  Transport transport_;
};

Result<S3Config> config_for(const RemoteOptions& options, std::string_view url) {
  auto c = resolve_s3_config(options, Environment::process());
  if (!c.ok()) return c.status().with_prefix(std::string(url));
  return c;
}

}  // namespace

bool is_s3_url(std::string_view url) {
  std::string_view scheme, rest;
  return io::split_scheme(url, &scheme, &rest) && io::iequals(scheme, "s3");
}

Result<std::shared_ptr<Source>> open_s3_source(std::string_view url, const RemoteOptions& options,
                                               std::string expected_etag) {
  JTREE_ASSIGN_OR_RETURN(S3Location loc, parse_s3_url(url));
  JTREE_ASSIGN_OR_RETURN(S3Config config, config_for(options, url));
  std::shared_ptr<Source> s = std::make_shared<RemoteSource>(
      std::make_unique<S3Endpoint>(std::move(loc), std::move(config), options.http), options.http,
      std::move(expected_etag));
  return s;
}

Status remove_s3_object(std::string_view url, const RemoteOptions& options) {
  JTREE_ASSIGN_OR_RETURN(S3Location loc, parse_s3_url(url));
  JTREE_ASSIGN_OR_RETURN(S3Config config, config_for(options, url));
  S3Client client(std::move(config), options);
  // DeleteObject succeeds for absent keys; a HEAD first tells NotFound apart.
  JTREE_RETURN_IF_ERROR(client.head(loc).status());
  return client.delete_object(loc);
}

}  // namespace jtree::remote

namespace jtree {

Result<std::vector<ObjectInfo>> list_objects(std::string_view s3_prefix_url,
                                             const RemoteOptions& options,
                                             uint64_t max_objects) {
  using namespace remote;
  JTREE_ASSIGN_OR_RETURN(S3Location loc, parse_s3_url(s3_prefix_url, /*need_key=*/false));
  JTREE_ASSIGN_OR_RETURN(S3Config config, config_for(options, s3_prefix_url));
  S3Client client(std::move(config), options);
  std::vector<ObjectInfo> out;
  std::string token;
  for (;;) {
    JTREE_ASSIGN_OR_RETURN(ListBucketPage page, client.list_page(loc.bucket, loc.key, token));
    for (ListedObject& o : page.objects) {
      if (out.size() >= max_objects) {
        return Status::resource_exhausted(std::string(s3_prefix_url) + ": more than " +
                                         std::to_string(max_objects) + " objects");
      }
      out.push_back({"s3://" + loc.bucket + "/" + o.key, o.size, std::move(o.etag)});
    }
    if (!page.truncated) break;
    if (page.next_continuation_token == token) {
      return Status::io_error(std::string(s3_prefix_url) +
                             ": ListObjectsV2 returned the same continuation token twice");
    }
    token = page.next_continuation_token;
  }
  return out;
}

Status delete_object(std::string_view s3_url, const RemoteOptions& options) {
  using namespace remote;
  if (!is_s3_url(s3_url)) {
    return Status::invalid_argument(std::string(s3_url) + ": delete_object takes s3:// URLs");
  }
  JTREE_ASSIGN_OR_RETURN(S3Location loc, parse_s3_url(s3_url));
  JTREE_ASSIGN_OR_RETURN(S3Config config, config_for(options, s3_url));
  S3Client client(std::move(config), options);
  return client.delete_object(loc);
}

}  // namespace jtree
