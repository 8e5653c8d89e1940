// The S3 XML answers jtree reads, and hostile variations of them.
#include <doctest/doctest.h>

#include "io/remote/s3_xml.h"

using namespace jtree::remote;

TEST_CASE("S3 XML: InitiateMultipartUploadResult, CopyPartResult, CompleteMultipartUploadResult") {
  auto id = parse_initiate_multipart_upload(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<InitiateMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Bucket>b</Bucket><Key>k</Key><UploadId>2~abc&amp;def</UploadId>"
      "</InitiateMultipartUploadResult>");
  REQUIRE(id.ok());
  CHECK(*id == "2~abc&def");

  auto etag = parse_copy_part_result(
      "<CopyPartResult><LastModified>2026-01-01T00:00:00.000Z</LastModified>"
      "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag></CopyPartResult>");
  REQUIRE(etag.ok());
  CHECK(*etag == "\"9b2cf535f27731c974343645a3985328\"");
  // Ceph RGW: no quotes.
  CHECK(*parse_copy_part_result("<CopyPartResult><ETag>abc</ETag></CopyPartResult>") == "abc");

  auto done = parse_complete_multipart_upload(
      "<CompleteMultipartUploadResult><Location>x</Location><Bucket>b</Bucket><Key>k</Key>"
      "<ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag></CompleteMultipartUploadResult>");
  REQUIRE(done.ok());
  CHECK(*done == "\"3858f62230ac3c915f300c664312c11f-9\"");
  // RGW sends an empty ETag.
  CHECK(parse_complete_multipart_upload("<CompleteMultipartUploadResult><ETag/>"
                                        "</CompleteMultipartUploadResult>")
            ->empty());
  // S3 may answer 200 with an error document: not a result.
  CHECK_FALSE(parse_complete_multipart_upload("<Error><Code>InternalError</Code></Error>").ok());
  CHECK_FALSE(parse_initiate_multipart_upload(
                  "<InitiateMultipartUploadResult><UploadId></UploadId>"
                  "</InitiateMultipartUploadResult>")
                  .ok());
}

TEST_CASE("S3 XML: Error") {
  auto e = parse_s3_error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\r\n<Error><Code>SignatureDoesNotMatch</Code>"
      "<Message>The request signature we calculated does not match the signature you provided."
      "</Message><RequestId>tx00000</RequestId><HostId>h</HostId></Error>");
  REQUIRE(e.ok());
  CHECK(e->code == "SignatureDoesNotMatch");
  CHECK(e->message.find("signature we calculated") != std::string::npos);
  CHECK(e->request_id == "tx00000");
  auto r = parse_s3_error("<Error><Code>AuthorizationHeaderMalformed</Code>"
                          "<Region>eu-west-1</Region></Error>");
  CHECK(r->region == "eu-west-1");
  CHECK_FALSE(parse_s3_error("<NotError/>").ok());
  CHECK_FALSE(parse_s3_error("").ok());
}

TEST_CASE("S3 XML: ListBucketResult with entities, prefixes and paging") {
  auto page = parse_list_bucket_result(
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>b</Name><Prefix>dir/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
      "<IsTruncated>true</IsTruncated>"
      "<Contents><Key>dir/a &amp; b.jtree</Key><Size>123</Size>"
      "<ETag>&quot;x&quot;</ETag></Contents>"
      "<Contents><Key>dir/caf&#233;&#x2603;</Key><Size>0</Size></Contents>"
      "<CommonPrefixes><Prefix>dir/sub/</Prefix></CommonPrefixes>"
      "<NextContinuationToken>tok/+=</NextContinuationToken></ListBucketResult>");
  REQUIRE(page.ok());
  REQUIRE(page->objects.size() == 2);
  CHECK(page->objects[0].key == "dir/a & b.jtree");
  CHECK(page->objects[0].size == 123);
  CHECK(page->objects[0].etag == "\"x\"");
  CHECK(page->objects[1].key == "dir/caf\xC3\xA9\xE2\x98\x83");
  CHECK(page->common_prefixes == std::vector<std::string>{"dir/sub/"});
  CHECK(page->truncated);
  CHECK(page->next_continuation_token == "tok/+=");

  auto last = parse_list_bucket_result("<ListBucketResult><IsTruncated>false</IsTruncated>"
                                       "</ListBucketResult>");
  REQUIRE(last.ok());
  CHECK(last->objects.empty());
  CHECK_FALSE(last->truncated);
  // Truncated without a token would page forever.
  CHECK_FALSE(parse_list_bucket_result("<ListBucketResult><IsTruncated>true</IsTruncated>"
                                        "</ListBucketResult>")
                  .ok());
  CHECK_FALSE(parse_list_bucket_result("<ListBucketResult><Contents><Size>1</Size></Contents>"
                                       "</ListBucketResult>")
                  .ok());
  CHECK_FALSE(parse_list_bucket_result("<ListBucketResult><Contents><Key>a</Key><Size>-1</Size>"
                                       "</Contents></ListBucketResult>")
                  .ok());
  // Entry limit.
  std::string many = "<ListBucketResult>";
  for (int i = 0; i < 5; ++i) many += "<Contents><Key>k</Key></Contents>";
  many += "</ListBucketResult>";
  CHECK(parse_list_bucket_result(many, 5).ok());
  auto over = parse_list_bucket_result(many, 4);
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().code() == jtree::StatusCode::kResourceExhausted);
}

TEST_CASE("S3 XML: malformed and hostile documents are refused") {
  for (const char* bad : {
           "<Error>",                                       // unterminated
           "<Error></Err>",                                 // mismatched
           "<Error><Code>x</Error></Code>",                 // crossed
           "<Error><Code>&bogus;</Code></Error>",           // unknown entity
           "<Error><Code>&#0;</Code></Error>",              // NUL
           "<Error><Code>&#x110000;</Code></Error>",        // beyond Unicode
           "<Error><Code>&#xD800;</Code></Error>",          // surrogate
           "<!DOCTYPE x [<!ENTITY a \"b\">]><Error/>",     // no DTDs
           "<Error/><Error/>",                              // two roots
           "text<Error/>",                                  // text outside the root
           "<Error><!-- unterminated comment </Error>",
           "<Error><![CDATA[ unterminated </Error>",
           "<Error a=\"unterminated></Error>",
           "< >",
       }) {
    CAPTURE(bad);
    CHECK_FALSE(parse_s3_error(bad).ok());
  }
  // Depth and size bounds.
  std::string deep;
  for (int i = 0; i < kMaxXmlDepth + 1; ++i) deep += "<a>";
  for (int i = 0; i < kMaxXmlDepth + 1; ++i) deep += "</a>";
  CHECK_FALSE(parse_s3_error(deep).ok());
  CHECK_FALSE(parse_s3_error(std::string(kMaxXmlBytes + 1, ' ')).ok());
  // Attributes with '>' inside quotes, comments and CDATA are fine.
  auto ok = parse_s3_error("<Error a='x>y'><!-- c --><Code><![CDATA[A<B]]></Code></Error>");
  REQUIRE(ok.ok());
  CHECK(ok->code == "A<B");
}

TEST_CASE("S3 XML: ListMultipartUploadsResult with paging, bounds and refusals") {
  const std::string doc =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListMultipartUploadsResult xmlns=\"http://"
      "s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket><KeyMarker></KeyMarker>"
      "<NextKeyMarker>p/a.jtree.seg-00001-of-00002</NextKeyMarker><NextUploadIdMarker>2~x"
      "</NextUploadIdMarker><MaxUploads>2</MaxUploads><IsTruncated>true</IsTruncated>"
      "<Upload><Key>p/a.jtree</Key><UploadId>2~abc&amp;d</UploadId><Initiator><ID>i</ID>"
      "</Initiator><Initiated>2026-11-25T15:40:00.123Z</Initiated></Upload><Upload><Key>"
      "<![CDATA[p/a.jtree.seg-00001-of-00002]]></Key><UploadId>2~x</UploadId></Upload>"
      "</ListMultipartUploadsResult>";
  auto page = parse_list_multipart_uploads(doc);
  REQUIRE_MESSAGE(page.ok(), page.status().to_string());
  REQUIRE(page->uploads.size() == 2);
  CHECK(page->uploads[0].key == "p/a.jtree");
  CHECK(page->uploads[0].upload_id == "2~abc&d");
  CHECK(page->uploads[0].initiated == "2026-11-25T15:40:00.123Z");
  CHECK(page->uploads[1].key == "p/a.jtree.seg-00001-of-00002");
  CHECK(page->uploads[1].initiated.empty());
  CHECK(page->truncated);
  CHECK(page->next_key_marker == "p/a.jtree.seg-00001-of-00002");
  CHECK(page->next_upload_id_marker == "2~x");
  // The entry limit.
  CHECK(parse_list_multipart_uploads(doc, 1).status().code() == jtree::StatusCode::kResourceExhausted);
  // An empty listing.
  auto empty = parse_list_multipart_uploads(
      "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>");
  REQUIRE(empty.ok());
  CHECK(empty->uploads.empty());
  CHECK_FALSE(empty->truncated);
  for (const char* bad : {
           "<ListBucketResult/>",  // another document
           "<ListMultipartUploadsResult><Upload><UploadId>x</UploadId></Upload>"
           "</ListMultipartUploadsResult>",  // no key
           "<ListMultipartUploadsResult><Upload><Key>k</Key><UploadId></UploadId></Upload>"
           "</ListMultipartUploadsResult>",  // empty upload id
           "<ListMultipartUploadsResult><IsTruncated>yes</IsTruncated>"
           "</ListMultipartUploadsResult>",
           "<ListMultipartUploadsResult><IsTruncated>true</IsTruncated>"
           "</ListMultipartUploadsResult>",  // truncated without a marker: would loop
       }) {
    CAPTURE(bad);
    auto r = parse_list_multipart_uploads(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().is_corruption());
  }
}
