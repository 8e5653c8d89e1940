# `cmake --install`: headers, libjtree.so / libjtree.a, the jtree CLI (tools/jtree), a CMake
# package (find_package(jtree CONFIG) -> jtree::jtree, the shared library, and with
# COMPONENTS static jtree::jtree_static) and jtree.pc for pkg-config. Both files are
# relocatable: the prefix given at install time (cmake --install BUILD --prefix DIR) is the one
# they point at.
include(CMakePackageConfigHelpers)
set(JTREE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/jtree)

# Two export sets, so that the package finds a library's dependencies only when that library is
# asked for (jtreeConfig.cmake): jtreeTargets.cmake holds jtree::jtree (libjtree.so, which
# carries its own dependencies as NEEDED entries), jtreeStaticTargets.cmake jtree::jtree_static
# (libjtree.a, whose users link zstd, xxHash, curl, OpenSSL and CUDA themselves), loaded by the
# component `static`.
install(TARGETS jtree_shared EXPORT jtreeTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev)
install(TARGETS jtree EXPORT jtreeStaticTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/lib/include/jtree
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "*.h")

# What libjtree.a links privately, which its users must link too (jtreeConfig.cmake's component
# `static` finds these packages; jtree.pc gives them to pkg-config --static). All of them go into
# Libs.private as plain -l flags, none into Requires.private: pkg-config wants every package of
# Requires.private to be installed even for `pkg-config --libs jtree` (for their Cflags, which
# jtree's headers do not need), so a user of libjtree.so would need the -dev packages of zstd and
# xxHash; and `pkg-config --static libcurl` asks for every library curl itself was built with
# (nghttp2, ssh2, ldap, gssapi, ...), whose -dev packages a user of the shared libcurl has no
# reason to install. (libzstd.pc and libxxhash.pc add nothing else: -pthread, given below.)
set(JTREE_PC_LIBS_PRIVATE "-lzstd -lxxhash ")
set(JTREE_HAVE_REMOTE_DEPS OFF)
if(TARGET CURL::libcurl)
  set(JTREE_HAVE_REMOTE_DEPS ON)
  string(APPEND JTREE_PC_LIBS_PRIVATE "-lcurl -lcrypto ")
endif()
# CUDA builds (cmake/cuda.cmake): libjtree.a needs the static CUDA runtime, from the toolkit
# it was built against.
if(JTREE_HAVE_CUDA)
  string(APPEND JTREE_PC_LIBS_PRIVATE "-L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt ")
endif()

install(EXPORT jtreeTargets NAMESPACE jtree:: DESTINATION ${JTREE_CMAKE_DIR} COMPONENT dev)
install(EXPORT jtreeStaticTargets NAMESPACE jtree:: DESTINATION ${JTREE_CMAKE_DIR} COMPONENT dev)
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
# Its Libs carry `-Wl,-rpath,${libdir}` unless the library goes where the dynamic loader looks
# anyway, so that `cc app.c $(pkg-config --cflags --libs jtree)` makes a program that starts
# without LD_LIBRARY_PATH or ldconfig. Open MPI's .pc files do the same (its default wrapper
# rpath); a distribution's /usr gets none, as its policy wants. (Debian's linker writes it as a
# RUNPATH, --enable-new-dtags: LD_LIBRARY_PATH still overrides it.) The prefix is known
# only when `cmake --install --prefix DIR` runs, so the file is written then
# (JtreePkgConfig.cmake), from the template configured here with @JTREE_PC_RPATH@ left in.
set(JTREE_PC_RPATH "@JTREE_PC_RPATH@")
configure_file(${CMAKE_CURRENT_LIST_DIR}/jtree.pc.in ${CMAKE_CURRENT_BINARY_DIR}/jtree.pc.template
               @ONLY)
# The loader's own directories, as CMake knows them: those it leaves out of the RPATH it gives
# programs (the platform's /lib, /usr/lib and the compiler's, /usr/lib/x86_64-linux-gnu on
# Debian). /usr/local/lib is not one of them: the loader finds it only after `ldconfig`.
set(_jt_loader_dirs ${CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES}
    ${CMAKE_C_IMPLICIT_LINK_DIRECTORIES} ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES})
list(REMOVE_DUPLICATES _jt_loader_dirs)
install(CODE "
  set(JTREE_PC_TEMPLATE \"${CMAKE_CURRENT_BINARY_DIR}/jtree.pc.template\")
  set(JTREE_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(JTREE_LOADER_DIRS \"${_jt_loader_dirs}\")
  include(\"${CMAKE_CURRENT_LIST_DIR}/JtreePkgConfig.cmake\")" COMPONENT dev)
