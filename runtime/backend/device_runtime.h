// What every delegate on one CUDA device shares: the device's primary context, one stream, and whether that
// context is still usable.
//
// The stream: every delegate of the device and the CUDA allocator's copies run on it, in the order they are
// issued, so the delegates of a device-planned program need no synchronization between them: ExecuTorch's
// et_copy H2D before a delegate and D2H after it go through the allocator (cuda_device_allocator.cpp), whose D2H
// synchronizes the stream before the host reads.
//
// Health: a kernel fault (illegal address or instruction, a kernel assert, ...) poisons a CUDA context for the
// rest of the process; after one, every later execute on the device fails at once with an error that says so,
// instead of running into a driver error per call.
#pragma once

#include <mutex>
#include <string>

#include "common/status.h"
#include "cuda/handles.h"

namespace cuda_triton {

class DeviceRuntime {
 public:
  // The runtime of device `ordinal`, created (its primary context retained) on first use and kept for the life
  // of the process, so that device memory handed out never outlives its context.
  static Status get(int ordinal, DeviceRuntime** out);

  CUcontext context() const {
    return context_.get();
  }
  CUdevice device() const {
    return context_.device();
  }
  int ordinal() const {
    return ordinal_;
  }
  CUstream stream() const {
    return stream_.get();
  }

  // Ok while the context is usable, else the error every execute on this device returns.
  Status health() const;
  // Records a failure of CUDA work; a device fault (Code::kDeviceFault) marks the context unusable.
  void record_failure(const Status& failure);

 private:
  DeviceRuntime() = default;

  int ordinal_ = 0;
  PrimaryContext context_;
  Stream stream_;
  mutable std::mutex mutex_;
  std::string fault_;  // the first device fault, empty while the context is usable
};

}  // namespace cuda_triton
