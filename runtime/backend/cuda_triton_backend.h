// Public entry points of libcuda_triton_backend.so besides the ExecuTorch registration itself.
#pragma once

#include <string>

namespace cuda_triton {

// The registration name: equals the Python BackendDetails class name (cuda_triton.backend.CudaTritonBackend).
constexpr const char* kBackendName = "CudaTritonBackend";

// Whether register_backend succeeded when the library was loaded.
bool backend_registered();

// Whether the CUDA DeviceAllocator ExecuTorch uses is ours (cuda_device_allocator.cpp): then its copies run on the
// delegates' stream.
bool device_allocator_registered_here();

// Records `message` as the backend's last error (cuda_triton_backend_last_error), for failures reported outside
// init()/execute() (the CUDA allocator's copies).
void remember_backend_error(const std::string& message);

}  // namespace cuda_triton

extern "C" {
// "ok", or why the backend cannot run here (no driver, no device, registration failed). Not thread-safe.
const char* cuda_triton_backend_status(void);
// The last error the backend reported from init()/execute(), "" if none. Not thread-safe.
const char* cuda_triton_backend_last_error(void);
// 1 if the backend registered itself with ExecuTorch.
int cuda_triton_backend_registered(void);
// Host time spent in the backend's execute() since the last reset (all delegates): calls, and the median (of the
// first 65536 calls), min and max in nanoseconds. For a device-planned program nothing in execute() waits for the
// GPU, so this is the host cost of a delegate call; a host-planned one includes its synchronization.
void cuda_triton_backend_execute_time(unsigned long long* calls, unsigned long long* median_ns,
                                      unsigned long long* min_ns, unsigned long long* max_ns);
void cuda_triton_backend_reset_execute_time(void);
// How the live delegates run, e.g. "3 delegates: 3 replay a CUDA graph (update), 0 launch directly". Not
// thread-safe.
const char* cuda_triton_backend_execution_summary(void);
// Page-locks the caller's host memory [ptr, ptr + bytes) for device 0's context and every other (portable), so
// that copies between it and the GPU run as DMA at full bus speed instead of through the driver's pageable staging
// (a runner pins the planned I/O tensors that ExecuTorch's host<->device copies read and write). 0 on success; -1
// when it cannot (no driver or one without the function, no device, the range or part of it already registered):
// the memory then stays pageable, which is slower but correct. Unpin before the memory is freed.
int cuda_triton_backend_pin_host_memory(void* ptr, unsigned long long bytes);
// Undoes cuda_triton_backend_pin_host_memory for the range that starts at `ptr`; 0 on success, -1 otherwise.
int cuda_triton_backend_unpin_host_memory(void* ptr);
// Waits for the work of every delegate (and the CUDA allocator's copies) on device `device`'s shared stream: what a
// caller does before it reads the outputs of a program whose outputs stay in device memory (cuda_triton.device_io),
// as nothing in execute() waits for the GPU then. 0 on success; -1 when the device cannot be used or the work
// failed on it (cuda_triton_backend_last_error says why; a fault makes the device unusable for later executes).
int cuda_triton_backend_synchronize(int device);
// Free and total memory of CUDA device `device` (cuMemGetInfo in its primary context); 0 on success, -1 when the
// device cannot be queried.
int cuda_triton_backend_device_memory(int device, unsigned long long* free_bytes, unsigned long long* total_bytes);
}
