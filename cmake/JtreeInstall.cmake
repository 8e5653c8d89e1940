# `cmake --install`: headers, libjtree.so / libjtree.a, the jtree CLI (tools/jtree), a CMake
# package (find_package(jtree CONFIG) -> jtree::jtree, the shared library, and
# jtree::jtree_static) and jtree.pc for pkg-config. Both files are relocatable: the prefix given
# at install time (cmake --install BUILD --prefix DIR) is the one they point at.
include(CMakePackageConfigHelpers)
set(JTREE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/jtree)

install(TARGETS jtree jtree_shared EXPORT jtreeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/lib/include/jtree
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "*.h")

# What libjtree.a links privately, which its users must link too (jtreeConfig.cmake finds
# these packages; jtree.pc gives them to pkg-config --static). libcurl and libcrypto go into
# Libs.private as plain -l flags, not into Requires.private: `pkg-config --static libcurl` asks
# for every library curl itself was built with (nghttp2, ssh2, ldap, gssapi, ...), whose -dev
# packages a user of the shared libcurl has no reason to install.
set(JTREE_PC_REQUIRES_PRIVATE "libzstd libxxhash")
set(JTREE_PC_LIBS_PRIVATE "")
set(JTREE_HAVE_REMOTE_DEPS OFF)
if(TARGET CURL::libcurl)
  set(JTREE_HAVE_REMOTE_DEPS ON)
  set(JTREE_PC_LIBS_PRIVATE "-lcurl -lcrypto ")
endif()
# CUDA builds (cmake/cuda.cmake): libjtree.a needs the static CUDA runtime, from the toolkit
# it was built against.
if(JTREE_HAVE_CUDA)
  string(APPEND JTREE_PC_LIBS_PRIVATE "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt ")
endif()

install(EXPORT jtreeTargets NAMESPACE jtree:: DESTINATION ${JTREE_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/jtreeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/jtreeConfig.cmake INSTALL_DESTINATION ${JTREE_CMAKE_DIR})
# 0.x: a new minor version may change the API, so only the same minor version is compatible.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/jtreeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/jtreeConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/jtreeConfigVersion.cmake
        DESTINATION ${JTREE_CMAKE_DIR} COMPONENT dev)

# jtree.pc: the prefix is found from the .pc file's own place (${pcfiledir}), so that the file
# stays right wherever the tree is installed or moved.
file(RELATIVE_PATH JTREE_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" JTREE_PC_TO_PREFIX "${JTREE_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/jtree.pc.in ${CMAKE_CURRENT_BINARY_DIR}/jtree.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/jtree.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
