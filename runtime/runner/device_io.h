// Device-resident program I/O for the runner: a program exported with cuda_triton.device_io (ExecuTorch's
// skip_h2d_for_method_inputs / skip_d2h_for_method_outputs) takes its inputs in device memory and writes its outputs
// there, with no copy at the program's boundary and no memory of its own reserved for them. The runner plays the
// caller that owns that memory: it copies each input to a device buffer once, before the timed executions, gives
// every output a device buffer, synchronizes after each execute (nothing inside execute() waits for the GPU), and
// copies the outputs back for printing and --output_file.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <executorch/extension/tensor/tensor_ptr.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/executor/method.h>

namespace cuda_triton::runner {

// A device buffer from ExecuTorch's CUDA DeviceAllocator, freed when it goes away.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // False with `error` set when there is no CUDA allocator or it cannot allocate `nbytes`.
  bool allocate(size_t nbytes, std::string* error);
  void* get() const {
    return ptr_;
  }
  size_t size() const {
    return bytes_;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class DeviceResidentIo {
 public:
  // For every input of `method` that the program expects in CUDA memory, copies the host tensor `inputs[i]` to a
  // device buffer and replaces `tensors[i]` and `inputs[i]` with a CUDA tensor over it. False with `error` set when
  // an allocation or the copy fails. Call after load_method, before the first execute.
  bool prepare_inputs(executorch::runtime::Method& method, std::vector<executorch::extension::TensorPtr>& tensors,
                      std::vector<executorch::runtime::EValue>& inputs, std::string* error);
  // Counts the outputs the program leaves in CUDA memory and gives each that has no buffer of its own a device
  // buffer (Method::set_output_data_ptr). False with `error` set when an allocation fails or ExecuTorch refuses.
  bool prepare_outputs(executorch::runtime::Method& method, std::string* error);
  // Whether the program has device-resident inputs or outputs: then each execute is followed by synchronize().
  bool active() const {
    return num_inputs_ + num_outputs_ > 0;
  }
  size_t num_inputs() const {
    return num_inputs_;
  }
  size_t num_outputs() const {
    return num_outputs_;
  }
  // Waits for the delegates' work on the GPU; false with `error` set when it failed there.
  static bool synchronize(std::string* error);
  // The output's elements, copied to the host when it lives in device memory; `host` keeps them and `out` is a host
  // tensor over them (or `t` itself when it is a host tensor). False with `error` set when the copy fails.
  static bool host_view(const executorch::aten::Tensor& t, std::vector<uint8_t>* host,
                        executorch::extension::TensorPtr* out, std::string* error);

 private:
  std::vector<DeviceBuffer> buffers_;
  size_t num_inputs_ = 0;
  size_t num_outputs_ = 0;
};

}  // namespace cuda_triton::runner
