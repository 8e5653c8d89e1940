// allocate_device_memory (jtree/device.h) with the CUDA runtime: cudaMalloc on the device,
// cudaFree when the object goes. Built only with JTREE_CUDA on (no_cuda.cc otherwise).
#include <cuda_runtime_api.h>

#include <string>

#include "cuda/device_scope.h"
#include "jtree/device.h"

namespace jtree {

namespace {

using cuda_detail::DeviceScope;

class CudaDeviceMemory final : public DeviceMemory {
 public:
  CudaDeviceMemory(void* data, uint64_t size, int device)
      : data_(data), size_(size), device_(device) {}
  ~CudaDeviceMemory() override {
    // (Its device made current: the last owner may go on any thread, and on one without a
    // context cudaFree would create one on device 0: device_scope.h.)
    DeviceScope scope(device_);
    if (data_ != nullptr && cudaFree(data_) != cudaSuccess) (void)cudaGetLastError();
  }
  void* data() const override { return data_; }
  uint64_t size() const override { return size_; }
  int device() const override { return device_; }

 private:
  void* const data_;
  const uint64_t size_;
  const int device_;
};

}  // namespace

Result<std::unique_ptr<DeviceMemory>> allocate_device_memory(int device, uint64_t bytes,
                                                              uint64_t keep_free) {
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<CopyEngine> engine, make_cuda_copy_engine(device));
  (void)engine;  // (made for its checks: CUDA, a device, `device` in range)
  const std::string name = "cuda:" + std::to_string(device);
  DeviceScope scope(device);
  if (scope.status() != cudaSuccess) {
    return Status::io_error(name + ": cudaSetDevice: " + cudaGetErrorString(scope.status()));
  }
  size_t free_bytes = 0, total_bytes = 0;
  auto out_of_memory = [&](const std::string& why) {
    return Status::resource_exhausted(name + ": cudaMalloc of " + std::to_string(bytes) +
                                      " bytes: " + why + " (" + std::to_string(free_bytes) +
                                      " of " + std::to_string(total_bytes) + " bytes free)");
  };
  if (keep_free > 0) {
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
    } else if (free_bytes < keep_free || free_bytes - keep_free < bytes) {
      return out_of_memory("it would leave less than the " + std::to_string(keep_free) +
                           " bytes asked to stay free");
    }
  }
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // (clears it: later calls must not report this failure)
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    (void)cudaGetLastError();
  }
  if (e == cudaErrorMemoryAllocation) return out_of_memory("out of memory");
  if (e != cudaSuccess) {
    return Status::io_error(name + ": cudaMalloc of " + std::to_string(bytes) + " bytes: " +
                            cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }
  return std::unique_ptr<DeviceMemory>(new CudaDeviceMemory(p, bytes, device));
}

}  // namespace jtree
