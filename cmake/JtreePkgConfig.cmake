# Runs at install time (JtreeInstall.cmake's install(CODE)): writes jtree.pc for the prefix being
# installed to and installs it. Given:
#   JTREE_PC_TEMPLATE  jtree.pc configured at configure time, with @JTREE_PC_RPATH@ left in
#   JTREE_PC_LIBDIR    CMAKE_INSTALL_LIBDIR (relative to the prefix)
#   JTREE_LOADER_DIRS  the directories the dynamic loader searches without being told
# The rpath is left out when <prefix>/<libdir> is one of those: a program finds the library there
# anyway, and a distribution's packages must not carry an rpath to /usr/lib.
# (Compared as normalized paths without a trailing slash.)
cmake_path(SET _jt_libdir NORMALIZE "${CMAKE_INSTALL_PREFIX}/${JTREE_PC_LIBDIR}")
string(REGEX REPLACE "(.)/$" "\\1" _jt_libdir "${_jt_libdir}")
set(JTREE_PC_RPATH "-Wl,-rpath,\${libdir} ")
foreach(_jt_dir IN LISTS JTREE_LOADER_DIRS)
  cmake_path(SET _jt_dir NORMALIZE "${_jt_dir}")
  string(REGEX REPLACE "(.)/$" "\\1" _jt_dir "${_jt_dir}")
  if(_jt_dir STREQUAL _jt_libdir)
    set(JTREE_PC_RPATH "")
  endif()
endforeach()
get_filename_component(_jt_pc_dir "${JTREE_PC_TEMPLATE}" DIRECTORY)
configure_file("${JTREE_PC_TEMPLATE}" "${_jt_pc_dir}/pc-install/jtree.pc" @ONLY)
# file(INSTALL) as install(FILES) would do it: DESTDIR honoured, the file listed in
# install_manifest.txt.
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${JTREE_PC_LIBDIR}/pkgconfig" TYPE FILE
     FILES "${_jt_pc_dir}/pc-install/jtree.pc")
