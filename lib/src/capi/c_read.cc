// capi/c_read.cc — reads into caller buffers (whole leaves, boxes, many at once), leaf
// payloads as allocated bytes, zero-copy views of mapped leaves and boxes, and verification. Every read
// is one jtree::Reader::read_many(), which checks the leaf, the box and the buffer's size and
// names the file and the leaf's key path in its errors.
#include <cstdlib>
#include <cstring>
#include <span>

#include "capi/c_internal.h"

using jtree::capi::box_of;
using jtree::capi::check_leaf;
using jtree::capi::check_reader;
using jtree::capi::guard;
using jtree::capi::invalid;
using jtree::capi::report;

namespace {

// The C request as a C++ one; InvalidArgument for what only C can get wrong (NULL pointers
// with a non-zero size). `what` names the request in messages.
jtree_status_t translate(const jtree_reader_t* r, const jtree_read_request_t& in, const char* fn,
                         const std::string& what, jtree::ReadRequest* out, jtree_error_t** err) {
  if (in.dst == nullptr && in.dst_bytes != 0) {
    return invalid(err, fn, what + ": dst is NULL but dst_bytes is " +
                                std::to_string(in.dst_bytes));
  }
  if ((in.begin == nullptr) != (in.end == nullptr)) {
    return invalid(err, fn, what + ": give both begin and end, or neither (the whole leaf)");
  }
  out->leaf = in.leaf;
  out->dst = {static_cast<std::byte*>(in.dst), in.dst_bytes};
  out->box.reset();
  if (in.begin != nullptr) {
    out->box.emplace();
    return box_of(r, in.leaf, in.rank, in.begin, in.end, fn, what + ": ", &*out->box, err);
  }  // (rank is ignored for whole-leaf requests)
  return JTREE_OK;
}

// A mapping (Reader::mapped_leaf / mapped_box) handed to the caller as a view it frees; a
// leaf that cannot be mapped is NotSupported, saying how to read it instead (`read_instead`:
// "it with jtree_reader_read()").
jtree_status_t hand_out(const jtree::Reader& r, uint32_t leaf,
                        jtree::Result<jtree::MappedLeaf> mapped, const char* read_instead,
                        jtree_leaf_view_t** out, jtree_error_t** err) {
  if (!mapped.ok()) return report(mapped.status(), err);
  if (!*mapped) {
    return jtree::capi::fail(
        err, JTREE_NOT_SUPPORTED,
        r.name() + ": leaf " + r.leaf_path(leaf) +
            " cannot be mapped: only array leaves of a local file opened with mmap, stored "
            "uncompressed in chunks as their C-order array (saved with JTREE_CODEC_RAW), can "
            "be; read " + read_instead);
  }
  auto* view = new jtree_leaf_view_t;
  view->owner = std::move(mapped->owner);
  view->data = mapped->bytes.data();
  view->size = mapped->bytes.size();
  *out = view;
  return JTREE_OK;
}

}  // namespace

extern "C" {

jtree_status_t jtree_reader_read(const jtree_reader_t* reader, uint32_t leaf, void* dst,
                                 size_t dst_bytes, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_read";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    if (dst == nullptr && dst_bytes != 0) return invalid(err, fn, "dst is NULL");
    return report(reader->reader->read(leaf, {static_cast<std::byte*>(dst), dst_bytes},
                                       reader->read),
                  err);
  });
}

jtree_status_t jtree_reader_read_box(const jtree_reader_t* reader, uint32_t leaf, size_t rank,
                                     const uint64_t* begin, const uint64_t* end, void* dst,
                                     size_t dst_bytes, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_read_box";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    if (rank > 0) {
      JTREE_C_REQUIRE(begin, fn, err);
      JTREE_C_REQUIRE(end, fn, err);
    }
    if (dst == nullptr && dst_bytes != 0) return invalid(err, fn, "dst is NULL");
    jtree::Box box;
    JTREE_C_CHECK(box_of(reader, leaf, rank, begin, end, fn, "", &box, err));
    return report(reader->reader->read_box(leaf, box, {static_cast<std::byte*>(dst), dst_bytes},
                                           reader->read),
                  err);
  });
}

jtree_status_t jtree_reader_read_many(const jtree_reader_t* reader,
                                      const jtree_read_request_t* requests, size_t count,
                                      jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_read_many";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    if (count == 0) return JTREE_OK;
    JTREE_C_REQUIRE(requests, fn, err);
    std::vector<jtree::ReadRequest> reqs(count);
    for (size_t i = 0; i < count; ++i) {
      JTREE_C_CHECK(
          translate(reader, requests[i], fn, "request " + std::to_string(i), &reqs[i], err));
    }
    return report(reader->reader->read_many(reqs, reader->read), err);
  });
}

jtree_status_t jtree_reader_read_bytes(const jtree_reader_t* reader, uint32_t leaf, char** data,
                                       size_t* size, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_read_bytes";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(data, fn, err);
    JTREE_C_REQUIRE(size, fn, err);
    // (read_bytes accounts the allocation against the limits before making it.)
    auto bytes = reader->reader->read_bytes(leaf, reader->read);
    if (!bytes.ok()) return report(bytes.status(), err);
    *data = jtree::capi::malloc_string(*bytes);
    *size = bytes->size();
    return JTREE_OK;
  });
}

// ---- views -----------------------------------------------------------------------------------

jtree_status_t jtree_reader_map_leaf(const jtree_reader_t* reader, uint32_t leaf,
                                     jtree_leaf_view_t** out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_map_leaf";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    const jtree::Reader& r = *reader->reader;
    return hand_out(r, leaf, r.mapped_leaf(leaf, reader->read), "it with jtree_reader_read()",
                    out, err);
  });
}

jtree_status_t jtree_reader_map_leaves(const jtree_reader_t* reader, const uint32_t* leaves,
                                       size_t count, jtree_leaf_view_t** views,
                                       jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_map_leaves";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    if (count == 0) return JTREE_OK;
    JTREE_C_REQUIRE(leaves, fn, err);
    JTREE_C_REQUIRE(views, fn, err);
    auto mapped = reader->reader->map_leaves(std::span(leaves, count), reader->read);
    if (!mapped.ok()) return report(mapped.status(), err);
    // Every view made before any is handed out, so that running out of memory half way
    // leaks nothing and leaves `views` untouched.
    std::vector<std::unique_ptr<jtree_leaf_view_t>> made(count);
    for (size_t i = 0; i < count; ++i) {
      jtree::MappedLeaf& m = (*mapped)[i];
      if (!m) continue;
      made[i] = std::make_unique<jtree_leaf_view_t>();
      made[i]->owner = std::move(m.owner);
      made[i]->data = m.bytes.data();
      made[i]->size = m.bytes.size();
    }
    for (size_t i = 0; i < count; ++i) views[i] = made[i].release();
    return JTREE_OK;
  });
}

jtree_status_t jtree_reader_map_box(const jtree_reader_t* reader, uint32_t leaf, size_t rank,
                                    const uint64_t* begin, const uint64_t* end,
                                    jtree_leaf_view_t** out, jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_map_box";
    JTREE_C_CHECK(check_leaf(reader, leaf, fn, err));
    if (rank > 0) {
      JTREE_C_REQUIRE(begin, fn, err);
      JTREE_C_REQUIRE(end, fn, err);
    }
    JTREE_C_REQUIRE(out, fn, err);
    jtree::Box box;
    JTREE_C_CHECK(box_of(reader, leaf, rank, begin, end, fn, "", &box, err));
    const jtree::Reader& r = *reader->reader;
    return hand_out(r, leaf, r.mapped_box(leaf, box, reader->read),
                    "the box with jtree_reader_read_box()", out, err);
  });
}

const void* jtree_leaf_view_data(const jtree_leaf_view_t* view) {
  return view ? view->data : nullptr;
}
size_t jtree_leaf_view_size(const jtree_leaf_view_t* view) { return view ? view->size : 0; }
void jtree_leaf_view_release(jtree_leaf_view_t* view) { delete view; }

// ---- verification ----------------------------------------------------------------------------

jtree_status_t jtree_reader_verify(const jtree_reader_t* reader, jtree_verify_report_t** out,
                                   jtree_error_t** err) {
  return guard(err, [&] {
    static const char* fn = "jtree_reader_verify";
    JTREE_C_CHECK(check_reader(reader, fn, err));
    JTREE_C_REQUIRE(out, fn, err);
    auto rep = reader->reader->verify(reader->read);
    if (!rep.ok()) return report(rep.status(), err);
    *out = new jtree_verify_report_t{std::move(*rep)};
    return JTREE_OK;
  });
}

int jtree_verify_report_ok(const jtree_verify_report_t* report) {
  return report && report->report.ok() ? 1 : 0;
}
size_t jtree_verify_report_num_problems(const jtree_verify_report_t* report) {
  return report ? report->report.problems.size() : 0;
}
uint64_t jtree_verify_report_chunks_checked(const jtree_verify_report_t* report) {
  return report ? report->report.chunks_checked : 0;
}
uint64_t jtree_verify_report_bytes_checked(const jtree_verify_report_t* report) {
  return report ? report->report.bytes_checked : 0;
}
jtree_status_t jtree_verify_report_problem_code(const jtree_verify_report_t* report,
                                                size_t index) {
  if (!report || index >= report->report.problems.size()) return JTREE_INVALID_ARGUMENT;
  return static_cast<jtree_status_t>(report->report.problems[index].status.code());
}
const char* jtree_verify_report_problem_where(const jtree_verify_report_t* report,
                                              size_t index) {
  if (!report || index >= report->report.problems.size()) return "";
  return report->report.problems[index].where.c_str();
}
const char* jtree_verify_report_problem_message(const jtree_verify_report_t* report,
                                                size_t index) {
  if (!report || index >= report->report.problems.size()) return "";
  return report->report.problems[index].status.message().c_str();
}
void jtree_verify_report_free(jtree_verify_report_t* report) { delete report; }

}  // extern "C"
