// allocate_device_memory (jtree/device.h) with the CUDA runtime: cudaMalloc on the device,
// cudaFree when the object goes. Built only with JTREE_CUDA on (no_cuda.cc otherwise).
#include <cuda_runtime_api.h>

#include <string>

#include "jtree/device.h"

namespace jtree {

namespace {

class CudaDeviceMemory final : public DeviceMemory {
 public:
  CudaDeviceMemory(void* data, uint64_t size, int device)
      : data_(data), size_(size), device_(device) {}
  ~CudaDeviceMemory() override {
    // (cudaFree needs no current device: the runtime knows which device the pointer is on.)
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

Result<std::unique_ptr<DeviceMemory>> allocate_device_memory(int device, uint64_t bytes) {
  JTREE_ASSIGN_OR_RETURN(std::unique_ptr<CopyEngine> engine, make_cuda_copy_engine(device));
  (void)engine;  // (made for its checks: CUDA, a device, `device` in range)
  const std::string name = "cuda:" + std::to_string(device);
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::io_error(name + ": cudaSetDevice: " + cudaGetErrorString(e));
  }
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes);
  size_t free_bytes = 0, total_bytes = 0;
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // (clears it: later calls must not report this failure)
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    (void)cudaGetLastError();
  }
  if (previous >= 0 && previous != device) (void)cudaSetDevice(previous);
  if (e == cudaErrorMemoryAllocation) {
    return Status::resource_exhausted(name + ": cudaMalloc of " + std::to_string(bytes) +
                                      " bytes: out of memory (" + std::to_string(free_bytes) +
                                      " of " + std::to_string(total_bytes) + " bytes free)");
  }
  if (e != cudaSuccess) {
    return Status::io_error(name + ": cudaMalloc of " + std::to_string(bytes) + " bytes: " +
                            cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
  }
  return std::unique_ptr<DeviceMemory>(new CudaDeviceMemory(p, bytes, device));
}

}  // namespace jtree
