// Fuzz target: the S3 XML answer parsers (lib/src/io/remote/s3_xml.h): error documents,
// multipart upload answers, copy results, bucket listings and multipart upload listings, as sent by a server or anyone
// in the middle. Every input must parse or give Corruption / ResourceExhausted, within the
// documented bounds.
//
// Options (the input's last byte): which parser (its value mod 6: 0-3 the single answers, 5
// the upload listing, 4 the bucket listing), and the listings' entry limit.
#include <string>

#include "fuzz_util.h"
#include "io/remote/s3_xml.h"

using namespace jtree;

namespace {

void refusal(const Status& st) {
  JTREE_FUZZ_CHECK(st.is_corruption() || st.code() == StatusCode::kResourceExhausted ||
                       st.is_invalid_argument(),
                   st.to_string());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Split<1> in(data, size);
  const std::string_view xml(reinterpret_cast<const char*>(in.payload.data()), in.payload.size());
  switch (in.opt[0] % 6) {
    case 0: {
      auto e = remote::parse_s3_error(xml);
      if (!e.ok()) refusal(e.status());
      break;
    }
    case 1: {
      auto id = remote::parse_initiate_multipart_upload(xml);
      if (id.ok()) JTREE_FUZZ_CHECK(!id->empty(), "empty upload id accepted");
      else refusal(id.status());
      break;
    }
    case 2: {
      auto etag = remote::parse_complete_multipart_upload(xml);
      if (!etag.ok()) refusal(etag.status());
      break;
    }
    case 3: {
      auto etag = remote::parse_copy_part_result(xml);
      if (etag.ok()) JTREE_FUZZ_CHECK(!etag->empty(), "empty copy etag accepted");
      else refusal(etag.status());
      break;
    }
    case 5: {
      const size_t max_entries = 1 + (in.opt[0] >> 3);
      auto page = remote::parse_list_multipart_uploads(xml, max_entries);
      if (page.ok()) {
        JTREE_FUZZ_CHECK(page->uploads.size() <= max_entries, "upload listing over its limit");
        for (const auto& u : page->uploads) {
          JTREE_FUZZ_CHECK(!u.upload_id.empty(), "empty upload id accepted");
        }
        JTREE_FUZZ_CHECK(!page->truncated || !page->next_key_marker.empty(),
                         "truncated listing without a marker accepted");
      } else {
        refusal(page.status());
      }
      break;
    }
    default: {
      const size_t max_entries = 1 + (in.opt[0] >> 3);
      auto page = remote::parse_list_bucket_result(xml, max_entries);
      if (page.ok()) {
        JTREE_FUZZ_CHECK(page->objects.size() <= max_entries, "listing over its entry limit");
      } else {
        refusal(page.status());
      }
      break;
    }
  }
  return 0;
}
