// capi/c_device.cc — loads into GPU memory (<jtree/device.h>) for C: the device options handle,
// the DirectIo names, the C requests translated, the stats out. Every setting is checked by
// jtree::DeviceOptions::check() (the setters call it at once) and every name by
// jtree::parse_direct_io(): the C API decides nothing of its own.
#include "capi/c_internal.h"

using jtree::capi::check_reader;
using jtree::capi::create_nothrow;
using jtree::capi::guard;
using jtree::capi::invalid;
using jtree::capi::report;

namespace {

static_assert(JTREE_DIRECT_IO_AUTO == static_cast<int>(jtree::DirectIo::kAuto) &&
                  JTREE_DIRECT_IO_ON == static_cast<int>(jtree::DirectIo::kOn) &&
                  JTREE_DIRECT_IO_OFF == static_cast<int>(jtree::DirectIo::kOff),
              "jtree_direct_io_t numbers are jtree::DirectIo's");

// Keeps `device` only if the library's own check (the one every load makes) accepts it, so
// that a setter fails at once with the library's message and leaves the handle as it was.
jtree_status_t set_checked(jtree_device_options_t* opts, const jtree::DeviceOptions& device,
                           const char* fn, jtree_error_t** err) {
  if (jtree::Status st = device.check(); !st.ok()) return invalid(err, fn, st.message());
  opts->device = device;
  return JTREE_OK;
}

// Writes the C++ stats into the caller's struct (the note malloc'd, NULL when empty or when
// there is no memory for it: the call's own outcome is not to be replaced by that).
void write_stats(const jtree::DeviceStats& in, jtree_device_stats_t* out) noexcept {
  out->direct_bytes = in.direct_bytes;
  out->buffered_bytes = in.buffered_bytes;
  out->direct_io_note = nullptr;
  try {
    if (!in.direct_io_note.empty()) {
      out->direct_io_note = jtree::capi::malloc_string(in.direct_io_note);
    }
  } catch (...) {
  }
}

}  // namespace

extern "C" {

int jtree_cuda_device_count(void) { return jtree::cuda_device_count(); }

uint64_t jtree_release_pinned_memory(void) {
  // (Only out of memory can throw, before any buffer is freed: 0 is then the truth.)
  try {
    return jtree::release_pinned_memory();
  } catch (...) {
    return 0;
  }
}

jtree_status_t jtree_pin_staging_buffers_async(const jtree_device_options_t* options,
                                               jtree_error_t** err) {
  return guard(err, [&] {
    return report(jtree::pin_staging_buffers_async(options ? options->device
                                                           : jtree::DeviceOptions{}),
                  err);
  });
}

jtree_status_t jtree_direct_io_parse(const char* name, jtree_direct_io_t* out,
                                     jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_direct_io_parse";
    JTREE_C_REQUIRE(name, fn, err);
    JTREE_C_REQUIRE(out, fn, err);
    jtree::Result<jtree::DirectIo> mode = jtree::parse_direct_io(name);
    if (!mode.ok()) return invalid(err, fn, mode.status().message());
    *out = static_cast<jtree_direct_io_t>(*mode);
    return JTREE_OK;
  });
}

const char* jtree_direct_io_name(jtree_direct_io_t mode) {
  const int m = jtree::capi::enum_int(mode);
  if (m < JTREE_DIRECT_IO_AUTO || m > JTREE_DIRECT_IO_OFF) return nullptr;
  // (string_views of literals: NUL-terminated, static.)
  return jtree::direct_io_name(static_cast<jtree::DirectIo>(m)).data();
}

jtree_device_options_t* jtree_device_options_create(void) {
  return create_nothrow<jtree_device_options_t>();
}
void jtree_device_options_free(jtree_device_options_t* opts) { delete opts; }

jtree_status_t jtree_device_options_set_device(jtree_device_options_t* opts, int device,
                                               jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_device_options_set_device";
    JTREE_C_REQUIRE(opts, fn, err);
    jtree::DeviceOptions o = opts->device;
    o.device = device;
    return set_checked(opts, o, fn, err);
  });
}

jtree_status_t jtree_device_options_set_staging(jtree_device_options_t* opts,
                                                uint64_t staging_bytes, int staging_buffers,
                                                jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_device_options_set_staging";
    JTREE_C_REQUIRE(opts, fn, err);
    jtree::DeviceOptions o = opts->device;
    o.staging_bytes = staging_bytes;
    o.staging_buffers = staging_buffers;
    return set_checked(opts, o, fn, err);
  });
}

jtree_status_t jtree_device_options_set_direct_io(jtree_device_options_t* opts,
                                                  jtree_direct_io_t mode, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_device_options_set_direct_io";
    JTREE_C_REQUIRE(opts, fn, err);
    jtree::DeviceOptions o = opts->device;
    // (The C enum's numbers are jtree::DirectIo's; check() refuses any other.)
    o.direct_io = static_cast<jtree::DirectIo>(jtree::capi::enum_int(mode));
    return set_checked(opts, o, fn, err);
  });
}

jtree_status_t jtree_reader_read_many_to_device(const jtree_reader_t* reader,
                                                const jtree_read_request_t* requests,
                                                size_t count,
                                                const jtree_device_options_t* options,
                                                jtree_device_stats_t* stats,
                                                jtree_error_t** err) {
  // (Written however the call ends, an exception included: what the load did before it
  // stopped, as c.h says.)
  jtree::DeviceStats out;
  const jtree_status_t status = guard(err, [&] {
    static const char* fn = "jtree_reader_read_many_to_device";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    if (count == 0) return JTREE_OK;
    JTREE_C_REQUIRE(requests, fn, err);
    std::vector<jtree::DeviceRequest> reqs(count);
    for (size_t i = 0; i < count; ++i) {
      const jtree_read_request_t& in = requests[i];
      const std::string what = "request " + std::to_string(i);
      if (in.dst == nullptr && in.dst_bytes != 0) {
        return invalid(err, fn, what + ": dst is NULL but dst_bytes is " +
                                    std::to_string(in.dst_bytes));
      }
      if ((in.begin == nullptr) != (in.end == nullptr)) {
        return invalid(err, fn, what + ": give both begin and end, or neither (the whole leaf)");
      }
      reqs[i].leaf = in.leaf;
      reqs[i].dst = in.dst;
      reqs[i].dst_bytes = in.dst_bytes;
      if (in.begin != nullptr) {
        reqs[i].box.emplace();
        JTREE_C_CHECK(jtree::capi::box_of(reader, in.leaf, in.rank, in.begin, in.end, fn,
                                          what + ": ", &*reqs[i].box, err));
      }
    }
    jtree::DeviceOptions o = options ? options->device : jtree::DeviceOptions{};
    o.read = reader->read;
    o.stats = &out;
    return report(jtree::read_many_to_device(*reader->reader, reqs, o), err);
  });
  if (stats != nullptr) write_stats(out, stats);
  return status;
}

}  // extern "C"
