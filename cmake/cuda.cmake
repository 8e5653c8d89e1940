# Optional CUDA support (jtree/device.h): JTREE_CUDA=AUTO|ON|OFF.
#
#   AUTO (default)  CUDA support when find_package(CUDAToolkit) finds the toolkit, else without
#   ON              the toolkit is required: configuring fails clearly without it
#   OFF             no CUDA code at all
#
# The CUDA code is plain C++ over the CUDA runtime API (no nvcc, no .cu file): it needs the
# toolkit's headers and libcudart_static, linked into libjtree so that nothing but the driver is
# needed at run time (the runtime loads libcuda itself, and reports "no device" without one).
# The staging pipeline and its host-memory stand-in are built in every configuration.
# Sets JTREE_HAVE_CUDA (ON/OFF; cached as JTREE_CUDA_ENABLED for scripts).
set(JTREE_CUDA AUTO CACHE STRING "CUDA support: AUTO (when the toolkit is found), ON (required), OFF")
set_property(CACHE JTREE_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${JTREE_CUDA}" _jt_cuda)
if(_jt_cuda MATCHES "^(1|TRUE|YES|Y)$")
  set(_jt_cuda ON)
elseif(_jt_cuda MATCHES "^(0|FALSE|NO|N)$")
  set(_jt_cuda OFF)
endif()
if(NOT _jt_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "JTREE_CUDA is '${JTREE_CUDA}': use AUTO, ON or OFF")
endif()

set(JTREE_HAVE_CUDA OFF)
if(NOT _jt_cuda STREQUAL "OFF")
  # find_package(CUDAToolkit) looks at CUDAToolkit_ROOT, CUDA_PATH, nvcc on PATH and
  # /usr/local/cuda. A toolkit installed as /usr/local/cuda-X.Y without the /usr/local/cuda link
  # (and without nvcc on PATH) is found too: the newest such directory is the hint.
  if(NOT CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND NOT DEFINED ENV{CUDA_PATH}
     AND NOT EXISTS /usr/local/cuda)
    file(GLOB _jt_cuda_dirs LIST_DIRECTORIES true /usr/local/cuda-*)
    if(_jt_cuda_dirs)
      list(SORT _jt_cuda_dirs COMPARE NATURAL ORDER DESCENDING)
      list(GET _jt_cuda_dirs 0 _jt_cuda_root)
      set(CUDAToolkit_ROOT ${_jt_cuda_root})
    endif()
  endif()
  if(_jt_cuda STREQUAL "ON")
    find_package(CUDAToolkit)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND AND TARGET CUDA::cudart_static)
    set(JTREE_HAVE_CUDA ON)
    message(STATUS "jtree: CUDA support on (CUDA ${CUDAToolkit_VERSION}, ${CUDAToolkit_LIBRARY_ROOT})")
  elseif(_jt_cuda STREQUAL "ON")
    message(FATAL_ERROR
      "JTREE_CUDA=ON, but the CUDA toolkit (its headers and libcudart_static) was not found. "
      "Install it, or point CMake at it with -DCUDAToolkit_ROOT=/path/to/cuda (the directory "
      "holding bin/nvcc, include/cuda_runtime_api.h and lib64/ or lib/libcudart_static.a), or "
      "configure with -DJTREE_CUDA=AUTO or OFF.")
  else()
    message(STATUS "jtree: CUDA toolkit not found: building without CUDA support "
                   "(JTREE_CUDA=AUTO; set CUDAToolkit_ROOT to use one)")
  endif()
endif()
if(_jt_cuda STREQUAL "OFF")
  message(STATUS "jtree: CUDA support off (JTREE_CUDA=OFF)")
endif()
set(JTREE_CUDA_ENABLED ${JTREE_HAVE_CUDA} CACHE INTERNAL "Whether this build has CUDA support")

set(_jt_cuda_src ${CMAKE_CURRENT_LIST_DIR}/../lib/src/cuda)
target_sources(jtree PRIVATE
  ${_jt_cuda_src}/staging.cc
  ${_jt_cuda_src}/staging_plan.cc
  ${_jt_cuda_src}/direct_plan.cc
  ${_jt_cuda_src}/host_copy_engine.cc
  ${_jt_cuda_src}/device.cc
  ${_jt_cuda_src}/device_options.cc)
if(JTREE_HAVE_CUDA)
  target_sources(jtree PRIVATE ${_jt_cuda_src}/cuda_copy_engine.cc
                               ${_jt_cuda_src}/cuda_device_memory.cc)
  # (PRIVATE: libjtree.so carries it; libjtree.a's users get it as a link-only dependency, and
  # jtreeConfig.cmake finds CUDAToolkit for them.)
  target_link_libraries(jtree PRIVATE CUDA::cudart_static)
else()
  target_sources(jtree PRIVATE ${_jt_cuda_src}/no_cuda.cc)
endif()
