// The main of a test program that needs a CUDA device (test_device_cuda, test_device_hash):
// without one it says so loudly and exits 77, which ctest reports as Skipped (not as passed);
// with JTREE_TEST_REQUIRE_ALL=1 (bench/gpu_checks.sh) it fails instead.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <doctest/doctest.h>

namespace jtree::testing {

// `untested`: what is not tested without a device, for the banner.
inline int run_with_cuda_device(int argc, char** argv, const char* test, const char* untested) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    const char* require = std::getenv("JTREE_TEST_REQUIRE_ALL");
    const std::string bar(80, '!');
    std::fprintf(stderr, "\n%s\n!!! %s SKIPPED: no CUDA device (cudaGetDeviceCount: %s, %d)\n"
                         "!!! %s\n%s\n\n",
                 bar.c_str(), test, cudaGetErrorName(e), n, untested, bar.c_str());
    return require != nullptr && std::string(require) == "1" ? 1 : 77;
  }
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  return ctx.run();
}

}  // namespace jtree::testing
