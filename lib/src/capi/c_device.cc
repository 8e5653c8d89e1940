// capi/c_device.cc — loads into GPU memory (<jtree/device.h>) for C: the reader's read
// options, the C requests translated, the staging options as arguments.
#include "capi/c_internal.h"
#include "jtree/device.h"

using jtree::capi::check_reader;
using jtree::capi::guard;
using jtree::capi::invalid;
using jtree::capi::report;

extern "C" {

int jtree_cuda_device_count(void) { return jtree::cuda_device_count(); }

jtree_status_t jtree_reader_read_many_to_device(const jtree_reader_t* reader,
                                                const jtree_read_request_t* requests,
                                                size_t count, int device,
                                                uint64_t staging_bytes, jtree_error_t** err) {
  return guard(err, [&] {
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
        reqs[i].box->begin.assign(in.begin, in.begin + in.rank);
        reqs[i].box->end.assign(in.end, in.end + in.rank);
      }
    }
    jtree::DeviceOptions o;
    o.read = reader->read;
    o.device = device;
    if (staging_bytes != 0) o.staging_bytes = staging_bytes;
    return report(jtree::read_many_to_device(*reader->reader, reqs, o), err);
  });
}

}  // extern "C"
