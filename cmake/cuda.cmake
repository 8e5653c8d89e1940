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
  ${_jt_cuda_src}/staged_load_plan.cc
  ${_jt_cuda_src}/staged_load.cc
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

# ---- chunk checksums on the GPU (lib/src/cuda/xxh3_kernel.cu, cuda/device_hash.h; issue 50) ----
# jtree_device_hash: a static library of its own, not part of libjtree while loads do not use it;
# the tests and bench_device_hash link it. The kernel is the project's one CUDA source, so nvcc is
# needed only for it: it is compiled when JTREE_CUDA is on, the CUDA compiler is found
# (check_language) and tests or benchmarks are built; otherwise the library holds
# no_device_hash.cc, whose functions report NotSupported. Architectures: sm_90 machine code (the
# H200 of bench/gpu_checks.sh) plus compute_90 PTX, which the driver compiles for later GPUs
# (forward compatibility); set CMAKE_CUDA_ARCHITECTURES to build for others (e.g. 80 for A100).
# Sets JTREE_HAVE_CUDA_KERNELS (cached as JTREE_CUDA_KERNELS_ENABLED for scripts).
set(JTREE_HAVE_CUDA_KERNELS OFF)
if(JTREE_HAVE_CUDA AND (JTREE_BUILD_TESTS OR JTREE_BUILD_BENCH))
  # (The nvcc of the toolkit found above. Its host compiler is its default, the one that
  # check_language tried; CMAKE_CUDA_HOST_COMPILER chooses another.)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND CUDAToolkit_NVCC_EXECUTABLE
     AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
    set(ENV{CUDACXX} "${CUDAToolkit_NVCC_EXECUTABLE}")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
    endif()
    enable_language(CUDA)
    set(JTREE_HAVE_CUDA_KERNELS ON)
    message(STATUS "jtree: GPU checksum kernel on (${CMAKE_CUDA_COMPILER}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES})")
  else()
    message(STATUS "jtree: no CUDA compiler (nvcc) found: the GPU checksum kernel is not built")
  endif()
endif()
set(JTREE_CUDA_KERNELS_ENABLED ${JTREE_HAVE_CUDA_KERNELS} CACHE INTERNAL
    "Whether this build has the GPU checksum kernel")

add_library(jtree_device_hash STATIC EXCLUDE_FROM_ALL ${_jt_cuda_src}/device_hash.cc)
target_include_directories(jtree_device_hash PUBLIC ${CMAKE_CURRENT_LIST_DIR}/../lib/src)
target_link_libraries(jtree_device_hash PUBLIC jtree PRIVATE jtree_flags)
if(JTREE_HAVE_CUDA_KERNELS)
  # (An object library of its own: jtree_flags' options are for the C++ compiler, not nvcc.)
  add_library(jtree_xxh3_kernel OBJECT EXCLUDE_FROM_ALL ${_jt_cuda_src}/xxh3_kernel.cu)
  set_target_properties(jtree_xxh3_kernel PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON)
  target_include_directories(jtree_xxh3_kernel PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../lib/src
                                                       ${CMAKE_CURRENT_LIST_DIR}/../lib/include)
  target_compile_options(jtree_xxh3_kernel PRIVATE -Xcompiler=-Wall,-Wextra
                         $<$<BOOL:${JTREE_WERROR}>:-Werror=all-warnings>)
  target_sources(jtree_device_hash PRIVATE $<TARGET_OBJECTS:jtree_xxh3_kernel>)
  target_link_libraries(jtree_device_hash PUBLIC CUDA::cudart_static)
else()
  target_sources(jtree_device_hash PRIVATE ${_jt_cuda_src}/no_device_hash.cc)
endif()
