// Tensor data helpers for the runner: strides from a dim order, random fills, files in logical
// (row-major over the sizes) order, and printing.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <executorch/runtime/core/exec_aten/exec_aten.h>

namespace cuda_triton::runner {

using executorch::aten::ScalarType;

size_t scalar_size(ScalarType t);  // 0 for unsupported types
const char* scalar_name(ScalarType t);

std::vector<int64_t> strides_from_dim_order(const std::vector<int64_t>& sizes, const std::vector<uint8_t>& dim_order);

// Fills `numel` elements with uniform values in [-1, 1) (floats) or small integers; false if unsupported.
bool fill_random(ScalarType t, void* data, size_t numel, std::mt19937& rng);

// Reads a file holding the tensor's elements in logical row-major order and stores them at `strides`.
bool read_logical(const std::string& path, size_t elem, const std::vector<int64_t>& sizes,
                  const std::vector<int64_t>& strides, void* dst, std::string* error);

// The tensor's elements in logical row-major order.
std::vector<uint8_t> gather_logical(const executorch::aten::Tensor& t);

double element_as_double(ScalarType t, const uint8_t* p);

}  // namespace cuda_triton::runner
