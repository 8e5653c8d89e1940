# The HTTP(S) and S3 backends (included by the top-level CMakeLists.txt when
# JTREE_WITH_REMOTE is ON). libcurl (multi interface) for transfers, OpenSSL for SigV4.
find_package(CURL REQUIRED)     # libcurl4-openssl-dev
find_package(OpenSSL REQUIRED)  # libssl-dev

set(JTREE_REMOTE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/content_range.cc
  ${CMAKE_CURRENT_LIST_DIR}/s3_xml.cc
  ${CMAKE_CURRENT_LIST_DIR}/sigv4.cc
  ${CMAKE_CURRENT_LIST_DIR}/s3_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/retry.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/remote_call.cc
  ${CMAKE_CURRENT_LIST_DIR}/object_pin.cc
  ${CMAKE_CURRENT_LIST_DIR}/range_handler.cc
  ${CMAKE_CURRENT_LIST_DIR}/whole_object.cc
  ${CMAKE_CURRENT_LIST_DIR}/remote_source.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_source.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_backend.cc
  ${CMAKE_CURRENT_LIST_DIR}/s3_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/s3_source.cc
  ${CMAKE_CURRENT_LIST_DIR}/s3_etag.cc
  ${CMAKE_CURRENT_LIST_DIR}/s3_sink.cc
  ${CMAKE_CURRENT_LIST_DIR}/s3_stale_uploads.cc
  ${CMAKE_CURRENT_LIST_DIR}/s3_backend.cc
)
target_sources(jtree PRIVATE ${JTREE_REMOTE_SOURCES})
target_link_libraries(jtree PRIVATE CURL::libcurl OpenSSL::Crypto)
# lib/src/io/backends.cc registers the http(s):// and s3:// backends when this is defined.
target_compile_definitions(jtree PRIVATE JTREE_HAVE_REMOTE=1)
