#include "runner/device_io.h"

#include <executorch/runtime/core/device_allocator.h>

#include <utility>

#include "backend/cuda_triton_backend.h"

namespace cuda_triton::runner {

using executorch::aten::Tensor;
using executorch::extension::make_tensor_ptr;
using executorch::extension::TensorPtr;
using executorch::runtime::DeviceAllocator;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Method;
using executorch::runtime::etensor::Device;
using executorch::runtime::etensor::DeviceType;

namespace {

constexpr executorch::runtime::etensor::DeviceIndex kDevice = 0;

DeviceAllocator* cuda_allocator(std::string* error) {
  DeviceAllocator* a = executorch::runtime::get_device_allocator(DeviceType::CUDA);
  if (a == nullptr) {
    *error = "no CUDA DeviceAllocator is registered (libcuda_triton_backend registers one when it loads)";
  }
  return a;
}

bool on_cuda(const EValue& v) {
  return v.isTensor() && v.toTensor().device_type() == DeviceType::CUDA;
}

// A tensor with `t`'s sizes, dim order, strides and dtype over `data` on `device`.
TensorPtr tensor_like(const Tensor& t, void* data, Device device) {
  return make_tensor_ptr(std::vector<executorch::aten::SizesType>(t.sizes().begin(), t.sizes().end()), data,
                         std::vector<executorch::aten::DimOrderType>(t.dim_order().begin(), t.dim_order().end()),
                         std::vector<executorch::aten::StridesType>(t.strides().begin(), t.strides().end()),
                         t.scalar_type(), device);
}

}  // namespace

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) {
    if (DeviceAllocator* a = executorch::runtime::get_device_allocator(DeviceType::CUDA)) {
      a->deallocate(ptr_, kDevice);
    }
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer gone(std::move(*this));
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

bool DeviceBuffer::allocate(size_t nbytes, std::string* error) {
  DeviceAllocator* a = cuda_allocator(error);
  if (a == nullptr) {
    return false;
  }
  auto p = a->allocate(nbytes, kDevice, 256);
  if (!p.ok()) {
    *error = "cannot allocate " + std::to_string(nbytes) + " bytes of device memory: " +
             cuda_triton_backend_last_error();
    return false;
  }
  *this = DeviceBuffer();
  ptr_ = *p;
  bytes_ = nbytes;
  return true;
}

bool DeviceResidentIo::prepare_inputs(Method& method, std::vector<TensorPtr>& tensors, std::vector<EValue>& inputs,
                                      std::string* error) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!on_cuda(method.get_input(i))) {
      continue;
    }
    const Tensor& host = *tensors[i];
    DeviceBuffer buf;
    if (!buf.allocate(host.nbytes(), error)) {
      *error = "input " + std::to_string(i) + ": " + *error;
      return false;
    }
    if (host.nbytes() > 0 &&
        cuda_allocator(error)->copy_host_to_device(buf.get(), host.const_data_ptr(), host.nbytes(), kDevice) !=
            Error::Ok) {
      *error = "input " + std::to_string(i) + ": the copy to device memory failed: " + cuda_triton_backend_last_error();
      return false;
    }
    tensors[i] = tensor_like(host, buf.get(), Device(DeviceType::CUDA, kDevice));
    inputs[i] = EValue(tensors[i]);
    buffers_.push_back(std::move(buf));
    ++num_inputs_;
  }
#pragma GCC diagnostic pop
  return true;
}

bool DeviceResidentIo::prepare_outputs(Method& method, std::string* error) {
  for (size_t i = 0; i < method.outputs_size(); ++i) {
    const EValue& out = method.get_output(i);
    if (!on_cuda(out)) {
      continue;
    }
    ++num_outputs_;  // left in device memory: each execute needs the runner's synchronization
    if (out.toTensor().const_data_ptr() != nullptr) {
      continue;  // the memory plan gave it a buffer
    }
    DeviceBuffer buf;
    if (!buf.allocate(out.toTensor().nbytes(), error)) {
      *error = "output " + std::to_string(i) + ": " + *error;
      return false;
    }
    const Error e = method.set_output_data_ptr(buf.get(), buf.size(), i);
    if (e != Error::Ok) {
      *error = "output " + std::to_string(i) + ": ExecuTorch refused its device buffer (set_output_data_ptr, error 0x" +
               std::to_string(static_cast<unsigned>(e)) + ")";
      return false;
    }
    buffers_.push_back(std::move(buf));
  }
  return true;
}

bool DeviceResidentIo::synchronize(std::string* error) {
  if (cuda_triton_backend_synchronize(kDevice) != 0) {
    *error = std::string("waiting for the GPU failed: ") + cuda_triton_backend_last_error();
    return false;
  }
  return true;
}

bool DeviceResidentIo::host_view(const Tensor& t, std::vector<uint8_t>* host, TensorPtr* out, std::string* error) {
  if (t.device_type() != DeviceType::CUDA) {
    *out = tensor_like(t, const_cast<void*>(t.const_data_ptr()), Device(DeviceType::CPU));
    return true;
  }
  host->assign(t.nbytes(), 0);
  DeviceAllocator* a = cuda_allocator(error);
  if (a == nullptr) {
    return false;
  }
  if (t.nbytes() > 0 && a->copy_device_to_host(host->data(), t.const_data_ptr(), t.nbytes(), kDevice) != Error::Ok) {
    *error = std::string("copying an output from device memory failed: ") + cuda_triton_backend_last_error();
    return false;
  }
  *out = tensor_like(t, host->data(), Device(DeviceType::CPU));
  return true;
}

}  // namespace cuda_triton::runner
