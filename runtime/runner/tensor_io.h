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

// Checks a tensor's metadata as a program states it before anything is allocated or copied for it: as many dim
// order entries as sizes, the dim order a permutation, sizes in [0, 2^31) and at most `max_bytes` of elements of
// `elem` bytes; sets `nbytes`. False with `error` set otherwise (a corrupted program, not a crash).
bool check_tensor_meta(const std::vector<int64_t>& sizes, const std::vector<uint8_t>& dim_order, size_t elem,
                       uint64_t max_bytes, uint64_t* nbytes, std::string* error);

// Fills `numel` elements with uniform values in [-1, 1) (floats) or small integers; false if unsupported.
bool fill_random(ScalarType t, void* data, size_t numel, std::mt19937& rng);

// Whether the file at `path` holds exactly `numel` elements of `elem` bytes (`error` says why not).
bool check_input_file(const std::string& path, size_t numel, size_t elem, std::string* error);

// Reads a file holding the tensor's elements in logical row-major order and stores them at `strides`.
bool read_logical(const std::string& path, size_t elem, const std::vector<int64_t>& sizes,
                  const std::vector<int64_t>& strides, void* dst, std::string* error);

// The tensor's elements in logical row-major order.
std::vector<uint8_t> gather_logical(const executorch::aten::Tensor& t);

double element_as_double(ScalarType t, const uint8_t* p);

}  // namespace cuda_triton::runner
