# libjtree.so: the shared library (target jtree_shared, exported as jtree::jtree).
#
# Made from the static library's own object files ($<TARGET_OBJECTS:jtree>), so each source is
# compiled once for both libraries (they are position-independent and compiled with
# -fvisibility=hidden, see the top-level CMakeLists.txt). Included after every file that adds
# sources or dependencies to `jtree` (remote.cmake, capi.cmake), because it copies jtree's link
# libraries as they stand at this point.
add_library(jtree_shared SHARED $<TARGET_OBJECTS:jtree>)
add_dependencies(jtree_shared jtree)
set_target_properties(jtree_shared PROPERTIES
  OUTPUT_NAME jtree
  EXPORT_NAME jtree
  VERSION ${PROJECT_VERSION}
  SOVERSION ${JTREE_ABI_VERSION}          # SONAME libjtree.so.0
  LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/jtree.map)
target_include_directories(jtree_shared PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/lib/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)

# The static library's dependencies, with the shared libzstd in place of the static one: a
# shared object cannot hold Debian's libzstd.a (not position-independent), and libzstd.so exports
# the experimental API the encoder uses since zstd 1.5.
get_target_property(_jt_libs jtree LINK_LIBRARIES)
list(TRANSFORM _jt_libs REPLACE "zstd::libzstd_static" "zstd::libzstd_shared")
target_link_libraries(jtree_shared PUBLIC Threads::Threads PRIVATE ${_jt_libs})

# Only the public API is exported (cmake/jtree.map); no static dependency is re-exported.
target_link_options(jtree_shared PRIVATE
  "LINKER:--version-script=${CMAKE_CURRENT_LIST_DIR}/jtree.map" "LINKER:--exclude-libs,ALL")
# Every symbol resolved at link time: a missing dependency fails here, not in a user's program.
# (Not with sanitizers: their runtimes are linked into the executables, not into libraries.)
if(NOT JTREE_SANITIZE AND NOT JTREE_FUZZ)
  target_link_options(jtree_shared PRIVATE "LINKER:--no-undefined")
endif()
