set(JTREE_CAPI_SOURCES
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/src/capi/c_errors.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/src/capi/c_options.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/src/capi/c_reader.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/src/capi/c_read.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/src/capi/c_writer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/lib/src/capi/c_device.cc
)
