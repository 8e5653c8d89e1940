// Making a CUDA device current for a scope without creating a context on another device
// (built only with JTREE_CUDA on).
//
// Why: jtree calls the CUDA runtime from threads of its own (the staging fillers, the pinning
// thread) and from the caller's, and must leave each thread's current device as it found it.
// But on a thread with no current context cudaGetDevice reports device 0, and since CUDA 12
// cudaSetDevice creates the device's primary context at once (about 0.5 GiB of GPU memory):
// "restoring" device 0 after a load to device 3 would put a context on GPU 0 in a process that
// never uses it (eight such processes on one host, one per GPU, each all GPUs visible: several
// GiB gone from GPU 0). So the previous device is restored only when its primary context
// exists already (as PyTorch's c10::cuda::MaybeSetDevice does), asked of the driver through
// the runtime's entry points (no link to libcuda: the static runtime loads it itself).
#pragma once

#include <cuda.h>  // (types only: the driver's functions are looked up at run time)
#include <cuda_runtime_api.h>

namespace jtree::cuda_detail {

// A driver function by name, or null (an old driver, or none).
inline void* driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  const cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault,
                                                         &found);
#else
  const cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &found);
#endif
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // (clears it: later calls must not report this failure)
    return nullptr;
  }
  return found == cudaDriverEntryPointSuccess ? fn : nullptr;
}

// Whether the primary context of `device` exists in this process (asked without creating
// it); true when the driver cannot say (then the device is restored, as before).
inline bool primary_context_active(int device) {
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using PrimaryState = CUresult (*)(CUdevice, unsigned int*, int*);
  static const auto device_get = reinterpret_cast<DeviceGet>(driver_function("cuDeviceGet"));
  static const auto primary_state =
      reinterpret_cast<PrimaryState>(driver_function("cuDevicePrimaryCtxGetState"));
  if (device_get == nullptr || primary_state == nullptr) return true;
  CUdevice handle = 0;
  unsigned int flags = 0;
  int active = 0;
  if (device_get(&handle, device) != CUDA_SUCCESS ||
      primary_state(handle, &flags, &active) != CUDA_SUCCESS) {
    return true;
  }
  return active != 0;
}

// Makes `device` current for the scope (a negative one: nothing changed) and then makes the
// thread's previous device current again where that creates no context (see above).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (device < 0) return;
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    }
    if (previous_ == device) return;
    status_ = cudaSetDevice(device);
    if (status_ != cudaSuccess) {
      (void)cudaGetLastError();  // (the caller reports status(); nothing was changed)
      return;
    }
    restore_ = previous_ >= 0 && primary_context_active(previous_);
  }
  ~DeviceScope() {
    if (restore_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

  cudaError_t status() const { return status_; }

 private:
  int previous_ = -1;
  bool restore_ = false;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace jtree::cuda_detail
