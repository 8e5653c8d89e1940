// capi/c_options.cc — the option handles: remote settings, open/read options, write options.
// Setters check only what C can get wrong (NULL, negative counts, values that do not fit the
// C++ field); the meaning of each setting is jtree::OpenOptions' / WriteOptions'.
#include <cmath>
#include <limits>

#include "capi/c_internal.h"

using jtree::capi::create_nothrow;
using jtree::capi::guard;
using jtree::capi::invalid;

namespace {

std::string str_or_empty(const char* s) { return s ? std::string(s) : std::string(); }

}  // namespace

extern "C" {

// ---- remote ----------------------------------------------------------------------------------

jtree_remote_options_t* jtree_remote_options_create(void) {
  return create_nothrow<jtree_remote_options_t>();
}
void jtree_remote_options_free(jtree_remote_options_t* opts) { delete opts; }

jtree_status_t jtree_remote_options_set_max_retries(jtree_remote_options_t* opts, int retries,
                                                    jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_remote_options_set_max_retries";
    JTREE_C_REQUIRE(opts, fn, err);
    if (retries < 0) return invalid(err, fn, "retries must be >= 0");
    opts->remote.http.max_retries = retries;
    return JTREE_OK;
  });
}

jtree_status_t jtree_remote_options_set_timeouts(jtree_remote_options_t* opts,
                                                 double deadline_seconds,
                                                 double connect_timeout_seconds,
                                                 double stall_timeout_seconds,
                                                 jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_remote_options_set_timeouts";
    JTREE_C_REQUIRE(opts, fn, err);
    for (double t : {deadline_seconds, connect_timeout_seconds, stall_timeout_seconds}) {
      if (!(t > 0) || !std::isfinite(t)) return invalid(err, fn, "timeouts must be > 0 seconds");
    }
    opts->remote.http.deadline_seconds = deadline_seconds;
    opts->remote.http.connect_timeout_seconds = connect_timeout_seconds;
    opts->remote.http.stall_timeout_seconds = stall_timeout_seconds;
    return JTREE_OK;
  });
}

jtree_status_t jtree_remote_options_set_max_concurrency(jtree_remote_options_t* opts,
                                                        int requests, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_remote_options_set_max_concurrency";
    JTREE_C_REQUIRE(opts, fn, err);
    if (requests < 1) return invalid(err, fn, "requests must be >= 1");
    opts->remote.http.max_concurrency = requests;
    return JTREE_OK;
  });
}

jtree_status_t jtree_remote_options_set_endpoint(jtree_remote_options_t* opts,
                                                 const char* endpoint, jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_remote_options_set_endpoint", err);
    opts->remote.s3.endpoint = str_or_empty(endpoint);
    return JTREE_OK;
  });
}

jtree_status_t jtree_remote_options_set_region(jtree_remote_options_t* opts, const char* region,
                                               jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_remote_options_set_region", err);
    opts->remote.s3.region = str_or_empty(region);
    return JTREE_OK;
  });
}

jtree_status_t jtree_remote_options_set_profile(jtree_remote_options_t* opts,
                                                const char* profile, jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_remote_options_set_profile", err);
    opts->remote.s3.profile = str_or_empty(profile);
    return JTREE_OK;
  });
}

jtree_status_t jtree_remote_options_set_credentials(jtree_remote_options_t* opts,
                                                    const char* access_key_id,
                                                    const char* secret_access_key,
                                                    const char* session_token,
                                                    jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_remote_options_set_credentials";
    JTREE_C_REQUIRE(opts, fn, err);
    const std::string id = str_or_empty(access_key_id), secret = str_or_empty(secret_access_key);
    if (id.empty() != secret.empty()) {
      return invalid(err, fn, "give both the access key id and the secret access key, or neither");
    }
    opts->remote.s3.access_key_id = id;
    opts->remote.s3.secret_access_key = secret;
    opts->remote.s3.session_token = str_or_empty(session_token);
    return JTREE_OK;
  });
}

jtree_status_t jtree_remote_options_set_ca_file(jtree_remote_options_t* opts,
                                                const char* ca_file, jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_remote_options_set_ca_file", err);
    opts->remote.http.ca_file = str_or_empty(ca_file);
    return JTREE_OK;
  });
}

jtree_status_t jtree_remote_options_set_verify_tls(jtree_remote_options_t* opts, int verify,
                                                   jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_remote_options_set_verify_tls", err);
    opts->remote.http.verify_tls = verify != 0;
    return JTREE_OK;
  });
}

jtree_status_t jtree_remote_options_add_http_header(jtree_remote_options_t* opts,
                                                    const char* header, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_remote_options_add_http_header";
    JTREE_C_REQUIRE(opts, fn, err);
    JTREE_C_REQUIRE(header, fn, err);
    const std::string h(header);
    // A line break would let the header smuggle further headers (or a body) into requests.
    if (h.find(':') == std::string::npos || h.find_first_of("\r\n") != std::string::npos) {
      return invalid(err, fn, "a header is \"Name: value\" on one line");
    }
    opts->remote.http.http_headers.push_back(h);
    return JTREE_OK;
  });
}

jtree_status_t jtree_remote_options_set_allow_full_download(jtree_remote_options_t* opts,
                                                           int allow, uint64_t max_bytes,
                                                           jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_remote_options_set_allow_full_download", err);
    opts->remote.http.allow_full_download = allow != 0;
    // (0 is the default, also after another value was set.)
    opts->remote.http.full_download_max_bytes =
        max_bytes != 0 ? max_bytes : jtree::HttpOptions{}.full_download_max_bytes;
    return JTREE_OK;
  });
}

// ---- open ------------------------------------------------------------------------------------

jtree_open_options_t* jtree_open_options_create(void) {
  return create_nothrow<jtree_open_options_t>();
}
void jtree_open_options_free(jtree_open_options_t* opts) { delete opts; }

jtree_status_t jtree_open_options_set_threads(jtree_open_options_t* opts, int threads,
                                              jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_open_options_set_threads";
    JTREE_C_REQUIRE(opts, fn, err);
    jtree::ReadOptions read = opts->read;
    read.threads = threads;
    // The library's own check (every read makes it), so that the setter fails at once.
    if (jtree::Status st = read.check(); !st.ok()) {
      return invalid(err, fn, st.message());
    }
    opts->read = std::move(read);
    return JTREE_OK;
  });
}

uint64_t jtree_release_scratch_memory(void) {
  // (Nothing in it allocates; a lock that throws std::system_error is all there is to catch,
  // before anything is freed: 0 is then the truth.)
  try {
    return jtree::release_scratch_memory();
  } catch (...) {
    return 0;
  }
}

jtree_status_t jtree_open_options_set_verify_checksums(jtree_open_options_t* opts, int verify,
                                                       jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_open_options_set_verify_checksums", err);
    opts->read.verify_checksums = verify != 0;
    return JTREE_OK;
  });
}

jtree_status_t jtree_open_options_set_use_mmap(jtree_open_options_t* opts, int use_mmap,
                                               jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_open_options_set_use_mmap", err);
    opts->open.use_mmap = use_mmap != 0;
    return JTREE_OK;
  });
}

jtree_status_t jtree_open_options_set_limit(jtree_open_options_t* opts, jtree_limit_t limit,
                                            uint64_t value, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_open_options_set_limit";
    JTREE_C_REQUIRE(opts, fn, err);
    jtree::Limits& l = opts->open.limits;
    auto set32 = [&](uint32_t& field) {
      if (value > std::numeric_limits<uint32_t>::max()) {
        return invalid(err, fn, "this limit is at most 2^32 - 1");
      }
      field = static_cast<uint32_t>(value);
      return JTREE_OK;
    };
    switch (jtree::capi::enum_int(limit)) {
      case JTREE_LIMIT_MAX_HEADER_BYTES: l.max_header_bytes = value; return JTREE_OK;
      case JTREE_LIMIT_MAX_INDEX_BYTES: l.max_index_bytes = value; return JTREE_OK;
      case JTREE_LIMIT_MAX_NODES: l.max_nodes = value; return JTREE_OK;
      case JTREE_LIMIT_MAX_LEAVES: l.max_leaves = value; return JTREE_OK;
      case JTREE_LIMIT_MAX_DEPTH: return set32(l.max_depth);
      case JTREE_LIMIT_MAX_RANK: return set32(l.max_rank);
      case JTREE_LIMIT_MAX_CHUNK_BYTES: l.max_chunk_bytes = value; return JTREE_OK;
      case JTREE_LIMIT_MAX_STRING_BYTES: l.max_string_bytes = value; return JTREE_OK;
      case JTREE_LIMIT_MAX_LEAF_BYTES: l.max_leaf_bytes = value; return JTREE_OK;
      case JTREE_LIMIT_MAX_TOTAL_BYTES: l.max_total_bytes = value; return JTREE_OK;
    }
    return invalid(err, fn, "unknown limit " + std::to_string(jtree::capi::enum_int(limit)));
  });
}

jtree_status_t jtree_open_options_set_remote(jtree_open_options_t* opts,
                                             const jtree_remote_options_t* remote,
                                             jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_open_options_set_remote", err);
    opts->open.remote = remote ? remote->remote : jtree::RemoteOptions{};
    return JTREE_OK;
  });
}

// ---- write -----------------------------------------------------------------------------------

namespace {

// Keeps `write` only if the library's own check of write options (the one every write makes)
// accepts it, so that a setter fails at once with the library's message.
jtree_status_t set_checked(jtree_write_options_t* opts, jtree::WriteOptions write,
                           const char* fn, jtree_error_t** err) {
  if (jtree::Status st = write.check(); !st.ok()) {
    return invalid(err, fn, st.message());
  }
  opts->write = std::move(write);
  return JTREE_OK;
}

}  // namespace

jtree_write_options_t* jtree_write_options_create(void) {
  return create_nothrow<jtree_write_options_t>();
}
void jtree_write_options_free(jtree_write_options_t* opts) { delete opts; }

jtree_status_t jtree_write_options_set_compression(jtree_write_options_t* opts,
                                                   jtree_codec_t codec, int level,
                                                   jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_write_options_set_compression";
    JTREE_C_REQUIRE(opts, fn, err);
    const int c = jtree::capi::enum_int(codec);
    if (c != JTREE_CODEC_RAW && c != JTREE_CODEC_ZSTD) {
      return invalid(err, fn, "unknown codec " + std::to_string(c));
    }
    jtree::WriteOptions write = opts->write;
    write.codec = static_cast<jtree::Codec>(c);
    if (c == JTREE_CODEC_ZSTD) write.level = level;
    return set_checked(opts, std::move(write), fn, err);
  });
}

jtree_status_t jtree_write_options_set_chunk_bytes(jtree_write_options_t* opts, uint64_t bytes,
                                                   jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_write_options_set_chunk_bytes";
    JTREE_C_REQUIRE(opts, fn, err);
    jtree::WriteOptions write = opts->write;
    write.target_chunk_bytes = bytes;
    return set_checked(opts, std::move(write), fn, err);
  });
}

jtree_status_t jtree_write_options_set_inline_threshold(jtree_write_options_t* opts,
                                                        uint64_t bytes, jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_write_options_set_inline_threshold", err);
    opts->write.inline_threshold = bytes;
    return JTREE_OK;
  });
}

jtree_status_t jtree_write_options_set_threads(jtree_write_options_t* opts, int threads,
                                               jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_write_options_set_threads";
    JTREE_C_REQUIRE(opts, fn, err);
    jtree::WriteOptions write = opts->write;
    write.threads = threads;
    return set_checked(opts, std::move(write), fn, err);
  });
}

jtree_status_t jtree_write_options_set_overwrite(jtree_write_options_t* opts, int overwrite,
                                                 jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_write_options_set_overwrite", err);
    opts->write.overwrite = overwrite != 0;
    return JTREE_OK;
  });
}

jtree_status_t jtree_write_options_set_sync(jtree_write_options_t* opts, int sync,
                                            jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_write_options_set_sync", err);
    opts->write.sync = sync != 0;
    return JTREE_OK;
  });
}

jtree_status_t jtree_write_options_set_remote(jtree_write_options_t* opts,
                                              const jtree_remote_options_t* remote,
                                              jtree_error_t** err) {
  return guard(err, [&] {
    JTREE_C_REQUIRE(opts, "jtree_write_options_set_remote", err);
    opts->write.remote = remote ? remote->remote : jtree::RemoteOptions{};
    return JTREE_OK;
  });
}

}  // extern "C"
