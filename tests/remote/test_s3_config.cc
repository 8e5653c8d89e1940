// The S3 credential chain, region, endpoint and addressing, with a fake environment.
#include <map>

#include <doctest/doctest.h>

#include "io/remote/s3_config.h"
#include "jtree/io.h"
#include "jtree/options.h"

using namespace jtree;
using namespace jtree::remote;

namespace {

struct FakeEnv {
  std::map<std::string, std::string> vars;
  std::map<std::string, std::string> files;
  Environment env() const {
    Environment e;
    e.getenv = [this](const std::string& n) -> std::optional<std::string> {
      auto it = vars.find(n);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
    e.read_file = [this](const std::string& p) -> std::optional<std::string> {
      auto it = files.find(p);
      if (it == files.end()) return std::nullopt;
      return it->second;
    };
    return e;
  }
};

const char* kCredentials =
    "# comment\n"
    "[default]\n"
    "aws_access_key_id = DEFAULTKEY\n"
    "aws_secret_access_key = defaultsecret\n"
    "\n"
    "[work]\r\n"
    "aws_access_key_id=WORKKEY\r\n"
    "aws_secret_access_key=worksecret\r\n"
    "aws_session_token = worktoken\r\n";

const char* kConfig =
    "[default]\n"
    "region = eu-central-1\n"
    "[profile work]\n"
    "region = ap-south-1\n"
    "s3 =\n"
    "  addressing_style = path\n"
    "  endpoint_url = https://minio.example:9000\n"
    "[profile onlyconfig]\n"
    "aws_access_key_id = CFGKEY\n"
    "aws_secret_access_key = cfgsecret\n"
    "endpoint_url = http://10.0.0.1:8080/prefix/\n";

FakeEnv home_env() {
  FakeEnv f;
  f.vars["HOME"] = "/home/u";
  f.files["/home/u/.aws/credentials"] = kCredentials;
  f.files["/home/u/.aws/config"] = kConfig;
  return f;
}

}  // namespace

TEST_CASE("s3:// URLs") {
  auto loc = parse_s3_url("s3://my-bucket/dir/a b%20.jtree");
  REQUIRE(loc.ok());
  CHECK(loc->bucket == "my-bucket");
  CHECK(loc->key == "dir/a b%20.jtree");  // literal, as boto3 takes it
  CHECK(loc->url() == "s3://my-bucket/dir/a b%20.jtree");
  CHECK_FALSE(parse_s3_url("s3://my-bucket").ok());
  CHECK(parse_s3_url("s3://my-bucket", false).ok());
  CHECK_FALSE(parse_s3_url("s3://ab/k").ok());           // too short
  CHECK_FALSE(parse_s3_url("s3://a%20b/k").ok());
  CHECK_FALSE(parse_s3_url("s3:///k").ok());
  CHECK_FALSE(parse_s3_url("https://b/k").ok());
}

TEST_CASE("AWS INI files: sections, profiles, nested blocks, comments") {
  IniSections c = parse_aws_ini(kConfig, true);
  CHECK(c["default"]["region"] == "eu-central-1");
  CHECK(c["work"]["region"] == "ap-south-1");
  CHECK(c["work"]["s3.addressing_style"] == "path");
  CHECK(c["work"]["s3.endpoint_url"] == "https://minio.example:9000");
  IniSections k = parse_aws_ini(kCredentials, false);
  CHECK(k["work"]["aws_session_token"] == "worktoken");
  CHECK(k["default"]["aws_access_key_id"] == "DEFAULTKEY");
  // Junk does not stop the parser.
  IniSections j = parse_aws_ini("garbage\n[x\nk=v\n[ok]\n=v\nk = v = w\n", false);
  CHECK(j["ok"]["k"] == "v = w");
  CHECK(j.count("x") == 0);
}

TEST_CASE("credentials: options, then environment, then the profile's files") {
  FakeEnv f = home_env();
  RemoteOptions o;
  auto c = resolve_s3_config(o, f.env());
  REQUIRE(c.ok());
  CHECK(c->access_key_id == "DEFAULTKEY");
  CHECK(c->secret_access_key == "defaultsecret");
  CHECK(c->credential_source.find("/home/u/.aws/credentials") != std::string::npos);
  CHECK(c->region == "eu-central-1");  // the default profile's region

  f.vars["AWS_ACCESS_KEY_ID"] = "ENVKEY";
  f.vars["AWS_SECRET_ACCESS_KEY"] = "envsecret";
  f.vars["AWS_SESSION_TOKEN"] = "envtoken";
  c = resolve_s3_config(o, f.env());
  CHECK(c->access_key_id == "ENVKEY");
  CHECK(c->session_token == "envtoken");
  CHECK(c->credential_source.find("environment") != std::string::npos);

  // AWS_PROFILE does not outrank the environment's keys (botocore's order)...
  f.vars["AWS_PROFILE"] = "work";
  c = resolve_s3_config(o, f.env());
  CHECK(c->access_key_id == "ENVKEY");
  CHECK(c->region == "ap-south-1");
  CHECK(c->addressing == S3Addressing::kPath);
  CHECK(c->endpoint_host == "minio.example:9000");
  // ...but a profile named in the options does.
  o.s3.profile = "work";
  c = resolve_s3_config(o, f.env());
  CHECK(c->access_key_id == "WORKKEY");
  CHECK(c->session_token == "worktoken");

  // Keys in the config file; an endpoint with a path prefix.
  o.s3.profile = "onlyconfig";
  c = resolve_s3_config(o, f.env());
  CHECK(c->access_key_id == "CFGKEY");
  CHECK(c->credential_source.find("/home/u/.aws/config") != std::string::npos);
  CHECK(c->scheme == "http");
  CHECK(c->endpoint_host == "10.0.0.1:8080");
  CHECK(c->base_path == "/prefix");

  // The options win over everything.
  o.s3.access_key_id = "OPTKEY";
  o.s3.secret_access_key = "optsecret";
  c = resolve_s3_config(o, f.env());
  CHECK(c->access_key_id == "OPTKEY");
  CHECK(c->session_token.empty());

  // A key id without its secret is a configuration error, said as such.
  RemoteOptions half;
  half.s3.access_key_id = "K";
  auto bad = resolve_s3_config(half, FakeEnv{}.env());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("without a secret") != std::string::npos);
}

TEST_CASE("no credentials anywhere: anonymous") {
  FakeEnv f;
  f.vars["HOME"] = "/nowhere";
  auto c = resolve_s3_config({}, f.env());
  REQUIRE(c.ok());
  CHECK(c->anonymous());
  CHECK(c->region == "us-east-1");
  CHECK(c->endpoint_host == "s3.us-east-1.amazonaws.com");
  CHECK_FALSE(c->custom_endpoint);
}

TEST_CASE("region and endpoint precedence; files named by the environment") {
  FakeEnv f;
  f.vars["HOME"] = "/h";
  f.vars["AWS_CONFIG_FILE"] = "/etc/awscfg";
  f.vars["AWS_SHARED_CREDENTIALS_FILE"] = "/etc/awscreds";
  f.files["/etc/awscfg"] = "[default]\nregion = from-file\nendpoint_url = http://file:1\n";
  f.files["/etc/awscreds"] = "[default]\naws_access_key_id=A\naws_secret_access_key=B\n";
  auto c = resolve_s3_config({}, f.env());
  CHECK(c->access_key_id == "A");
  CHECK(c->region == "from-file");
  CHECK(c->endpoint_host == "file:1");
  f.vars["AWS_DEFAULT_REGION"] = "default-region";
  f.vars["AWS_ENDPOINT_URL"] = "https://generic:443";
  c = resolve_s3_config({}, f.env());
  CHECK(c->region == "default-region");
  CHECK(c->endpoint_host == "generic");  // a default port is not part of the Host header
  f.vars["AWS_REGION"] = "region";
  f.vars["AWS_ENDPOINT_URL_S3"] = "http://127.0.0.1:7480/";
  c = resolve_s3_config({}, f.env());
  CHECK(c->region == "region");
  CHECK(c->scheme == "http");
  CHECK(c->endpoint_host == "127.0.0.1:7480");
  CHECK(c->base_path.empty());
  RemoteOptions o;
  o.s3.region = "opt";
  o.s3.endpoint = "https://storage.googleapis.com";
  c = resolve_s3_config(o, f.env());
  CHECK(c->region == "opt");
  CHECK(c->endpoint_host == "storage.googleapis.com");
  o.s3.endpoint = "storage.googleapis.com";  // no scheme
  CHECK_FALSE(resolve_s3_config(o, f.env()).ok());
  o.s3.endpoint = "ftp://x";
  CHECK_FALSE(resolve_s3_config(o, f.env()).ok());
}

TEST_CASE("addressing: virtual-hosted on AWS, path-style on custom endpoints, as configured") {
  S3Config aws;
  aws.scheme = "https";
  aws.endpoint_host = "s3.eu-west-1.amazonaws.com";
  auto t = s3_target(aws, "my-bucket", "a b/c+d");
  CHECK(t.host == "my-bucket.s3.eu-west-1.amazonaws.com");
  CHECK(t.url_prefix == "https://my-bucket.s3.eu-west-1.amazonaws.com");
  CHECK(t.canonical_uri == "/a%20b/c%2Bd");
  // Dots do not fit the wildcard certificate: path-style.
  t = s3_target(aws, "my.bucket", "k");
  CHECK(t.host == "s3.eu-west-1.amazonaws.com");
  CHECK(t.canonical_uri == "/my.bucket/k");
  // Bucket-level calls.
  CHECK(s3_target(aws, "my-bucket", "").canonical_uri == "/");

  S3Config custom = aws;
  custom.scheme = "http";
  custom.endpoint_host = "127.0.0.1:7480";
  custom.custom_endpoint = true;
  t = s3_target(custom, "bkt", "x/y");
  CHECK(t.url_prefix == "http://127.0.0.1:7480");
  CHECK(t.canonical_uri == "/bkt/x/y");
  CHECK(s3_target(custom, "bkt", "").canonical_uri == "/bkt");
  custom.addressing = S3Addressing::kVirtual;
  custom.endpoint_host = "localhost:7480";
  t = s3_target(custom, "bkt", "x");
  CHECK(t.host == "bkt.localhost:7480");
  CHECK(t.canonical_uri == "/x");
  custom.base_path = "/pre";
  custom.addressing = S3Addressing::kPath;
  CHECK(s3_target(custom, "bkt", "x").canonical_uri == "/pre/bkt/x");
}

TEST_CASE("endpoint: a profile's [services] section, in boto3's precedence") {
  FakeEnv f;
  f.vars["HOME"] = "/h";
  f.files["/h/.aws/config"] =
      "[default]\n"
      "endpoint_url = http://global:1\n"
      "services = local\n"
      "[profile plugin]\n"
      "endpoint_url = http://global:1\n"
      "s3 =\n"
      "  endpoint_url = http://plugin:2\n"
      "[profile both]\n"
      "services = local\n"
      "s3 =\n"
      "  endpoint_url = http://plugin:2\n"
      "[profile missing]\n"
      "services = nosuchsection\n"
      "endpoint_url = http://global:1\n"
      "[profile ignoring]\n"
      "services = local\n"
      "ignore_configured_endpoint_urls = TRUE\n"
      "[services local]\n"
      "dynamodb =\n"
      "  endpoint_url = http://dynamo:9\n"
      "s3 =\n"
      "  endpoint_url = http://services:3\n";
  auto host = [&](const std::string& profile) {
    RemoteOptions o;
    o.s3.profile = profile;
    auto c = resolve_s3_config(o, f.env());
    REQUIRE(c.ok());
    return c->custom_endpoint ? c->endpoint_host : std::string("aws");
  };
  // The services section's s3 endpoint_url wins over the profile's own endpoint_url, and over
  // its nested s3 endpoint_url; another service's (dynamodb) is not taken.
  CHECK(host("default") == "services:3");
  CHECK(host("both") == "services:3");
  CHECK(host("plugin") == "plugin:2");
  CHECK(host("missing") == "global:1");
  // ignore_configured_endpoint_urls (the profile's, case-insensitive): AWS's endpoint.
  CHECK(host("ignoring") == "aws");

  // The environment wins over every file setting: AWS_ENDPOINT_URL, then AWS_ENDPOINT_URL_S3.
  f.vars["AWS_ENDPOINT_URL"] = "http://env:4";
  CHECK(host("default") == "env:4");
  f.vars["AWS_ENDPOINT_URL_S3"] = "http://envs3:5";
  CHECK(host("default") == "envs3:5");
  CHECK(host("ignoring") == "aws");  // the profile's switch ignores the environment too

  // AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true ignores the environment and the files; set to
  // anything else it overrides the profile's switch (the environment's setting wins).
  f.vars["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "true";
  CHECK(host("default") == "aws");
  CHECK(host("plugin") == "aws");
  f.vars["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "false";
  CHECK(host("ignoring") == "envs3:5");

  // An endpoint given in the options is used whatever the switch says.
  f.vars["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "true";
  RemoteOptions o;
  o.s3.endpoint = "http://explicit:6";
  auto c = resolve_s3_config(o, f.env());
  REQUIRE(c.ok());
  CHECK(c->endpoint_host == "explicit:6");
}

TEST_CASE("AWS INI files: [services NAME] sections keep their name") {
  auto s = parse_aws_ini("[services x]\ns3 =\n  endpoint_url = http://a:1\n[profile p]\n"
                         "services = x\n", true);
  CHECK(s["services x"]["s3.endpoint_url"] == "http://a:1");
  CHECK(s["p"]["services"] == "x");
}

TEST_CASE("check_remote_options: the values a remote open or write can use") {
  CHECK(check_remote_options({}).ok());
  auto refused = [](auto edit) {
    RemoteOptions o;
    edit(o);
    const Status st = check_remote_options(o);
    return st.is_invalid_argument();
  };
  CHECK(refused([](RemoteOptions& o) { o.http.max_retries = -1; }));
  CHECK(refused([](RemoteOptions& o) { o.http.deadline_seconds = 0; }));
  CHECK(refused([](RemoteOptions& o) { o.http.connect_timeout_seconds = -1; }));
  CHECK(refused([](RemoteOptions& o) { o.http.stall_timeout_seconds = 1.0 / 0.0; }));
  CHECK(refused([](RemoteOptions& o) { o.http.max_concurrency = 0; }));
  CHECK(refused([](RemoteOptions& o) { o.http.fetch_bytes = 0; }));
  CHECK(refused([](RemoteOptions& o) { o.http.http_headers = {"no colon"}; }));
  CHECK(refused([](RemoteOptions& o) { o.http.http_headers = {"A: b\r\nB: c"}; }));
  CHECK(refused([](RemoteOptions& o) { o.s3.part_size = 1 << 20; }));
  CHECK(refused([](RemoteOptions& o) { o.s3.upload_concurrency = 0; }));
  CHECK(refused([](RemoteOptions& o) { o.s3.secret_access_key = "s"; }));
  CHECK(refused([](RemoteOptions& o) { o.s3.session_token = "t"; }));
  RemoteOptions ok;
  ok.http.max_retries = 0;
  ok.http.http_headers = {"Authorization: Bearer x"};
  ok.s3.part_size = 5ull << 20;
  ok.s3.access_key_id = "k";
  ok.s3.secret_access_key = "s";
  CHECK(check_remote_options(ok).ok());
  // Every remote open checks them (before any request); a local one does not read them.
  OpenOptions oo;
  oo.remote.http.max_concurrency = 0;
  auto r = open_source("http://127.0.0.1:9/x.jtree", oo);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().is_invalid_argument());
  CHECK(r.status().message().find("max_concurrency") != std::string::npos);
}
