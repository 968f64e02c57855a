#include "backend/device_runtime.h"

#include <array>
#include <memory>

namespace cuda_triton {

namespace {
constexpr int kMaxDevices = 64;
std::mutex g_devices_mutex;
std::array<DeviceRuntime*, kMaxDevices> g_devices{};  // never freed (see DeviceRuntime::get)
}  // namespace

Status DeviceRuntime::get(int ordinal, DeviceRuntime** out) {
  if (ordinal < 0 || ordinal >= kMaxDevices) {
    return Status(Code::kNotSupported, "CUDA device " + std::to_string(ordinal) + " is out of range");
  }
  std::lock_guard<std::mutex> lock(g_devices_mutex);
  DeviceRuntime*& slot = g_devices[static_cast<size_t>(ordinal)];
  if (slot == nullptr) {
    std::unique_ptr<DeviceRuntime> rt(new DeviceRuntime());
    rt->ordinal_ = ordinal;
    CT_RETURN_IF_ERROR(PrimaryContext::retain(ordinal, &rt->context_));
    ScopedContext scope(rt->context_.get());
    CT_RETURN_IF_ERROR(scope.status());
    CT_RETURN_IF_ERROR(Stream::create(&rt->stream_));
    slot = rt.release();
  }
  *out = slot;
  return Status::Ok();
}

Status DeviceRuntime::health() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fault_.empty()) {
    return Status::Ok();
  }
  return Status(Code::kDeviceFault, "the CUDA context of device " + std::to_string(ordinal_) +
                                        " is unusable: earlier CUDA work on it failed with " + fault_ +
                                        "; a fault poisons the context for the rest of the process, so nothing "
                                        "more runs on this device until the process restarts");
}

void DeviceRuntime::record_failure(const Status& failure) {
  if (failure.code() != Code::kDeviceFault) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (fault_.empty()) {
    fault_ = failure.message();
  }
}

}  // namespace cuda_triton
