#include "runner/tensor_io.h"

#include <cstring>
#include <fstream>

namespace cuda_triton::runner {

size_t scalar_size(ScalarType t) {
  switch (t) {
    case ScalarType::Half:
    case ScalarType::BFloat16:
    case ScalarType::Short:
      return 2;
    case ScalarType::Float:
    case ScalarType::Int:
      return 4;
    case ScalarType::Double:
    case ScalarType::Long:
      return 8;
    case ScalarType::Bool:
    case ScalarType::Byte:
    case ScalarType::Char:
      return 1;
    default:
      return 0;
  }
}

const char* scalar_name(ScalarType t) {
  switch (t) {
    case ScalarType::Half:
      return "float16";
    case ScalarType::BFloat16:
      return "bfloat16";
    case ScalarType::Float:
      return "float32";
    case ScalarType::Double:
      return "float64";
    case ScalarType::Long:
      return "int64";
    case ScalarType::Int:
      return "int32";
    case ScalarType::Short:
      return "int16";
    case ScalarType::Char:
      return "int8";
    case ScalarType::Byte:
      return "uint8";
    case ScalarType::Bool:
      return "bool";
    default:
      return "unsupported";
  }
}

std::vector<int64_t> strides_from_dim_order(const std::vector<int64_t>& sizes, const std::vector<uint8_t>& dim_order) {
  std::vector<int64_t> strides(sizes.size(), 1);
  int64_t running = 1;
  for (size_t k = dim_order.size(); k-- > 0;) {
    const size_t d = dim_order[k];
    if (d >= sizes.size()) {
      break;
    }
    strides[d] = running;
    running *= sizes[d] > 0 ? sizes[d] : 1;
  }
  return strides;
}

bool check_tensor_meta(const std::vector<int64_t>& sizes, const std::vector<uint8_t>& dim_order, size_t elem,
                       uint64_t max_bytes, uint64_t* nbytes, std::string* error) {
  if (dim_order.size() != sizes.size()) {
    *error = "has " + std::to_string(sizes.size()) + " sizes but " + std::to_string(dim_order.size()) +
             " dim order entries";
    return false;
  }
  std::vector<bool> seen(sizes.size(), false);
  for (uint8_t d : dim_order) {
    if (d >= sizes.size() || seen[d]) {
      *error = "has a dim order that is not a permutation of its dims";
      return false;
    }
    seen[d] = true;
  }
  uint64_t bytes = elem;
  for (int64_t s : sizes) {
    if (s < 0 || s >= (int64_t(1) << 31)) {
      *error = "has a size of " + std::to_string(s);
      return false;
    }
    if (s > 0 && bytes > max_bytes / static_cast<uint64_t>(s)) {
      *error = "needs more than " + std::to_string(max_bytes) + " bytes";
      return false;
    }
    bytes *= static_cast<uint64_t>(s);
  }
  *nbytes = bytes;
  return true;
}

namespace {

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (exp <= 0) {
    return static_cast<uint16_t>(sign);  // inputs are in [-1, 1): flush tiny values to zero
  }
  if (exp >= 31) {
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  uint32_t h = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  if (mant & 0x1000u) {
    ++h;  // round half up
  }
  return static_cast<uint16_t>(h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      x = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// scatter: logical -> strided; otherwise strided -> logical.
void copy_strided(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, size_t elem,
                  uint8_t* logical, uint8_t* strided, bool scatter) {
  const size_t rank = sizes.size();
  size_t numel = 1;
  for (int64_t s : sizes) {
    numel *= static_cast<size_t>(s);
  }
  std::vector<int64_t> idx(rank, 0);
  for (size_t i = 0; i < numel; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < rank; ++d) {
      off += idx[d] * strides[d];
    }
    if (scatter) {
      std::memcpy(strided + off * elem, logical + i * elem, elem);
    } else {
      std::memcpy(logical + i * elem, strided + off * elem, elem);
    }
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < sizes[d]) {
        break;
      }
      idx[d] = 0;
    }
  }
}

}  // namespace

bool fill_random(ScalarType t, void* data, size_t numel, std::mt19937& rng) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 7);
  switch (t) {
    case ScalarType::Float: {
      float* p = static_cast<float*>(data);
      for (size_t i = 0; i < numel; ++i) p[i] = uni(rng);
      return true;
    }
    case ScalarType::Double: {
      double* p = static_cast<double*>(data);
      for (size_t i = 0; i < numel; ++i) p[i] = uni(rng);
      return true;
    }
    case ScalarType::Half: {
      uint16_t* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < numel; ++i) p[i] = float_to_half(uni(rng));
      return true;
    }
    case ScalarType::BFloat16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < numel; ++i) {
        float f = uni(rng);
        uint32_t x;
        std::memcpy(&x, &f, 4);
        p[i] = static_cast<uint16_t>(x >> 16);
      }
      return true;
    }
    case ScalarType::Long: {
      int64_t* p = static_cast<int64_t*>(data);
      for (size_t i = 0; i < numel; ++i) p[i] = small(rng);
      return true;
    }
    case ScalarType::Int: {
      int32_t* p = static_cast<int32_t*>(data);
      for (size_t i = 0; i < numel; ++i) p[i] = small(rng);
      return true;
    }
    case ScalarType::Bool: {
      uint8_t* p = static_cast<uint8_t*>(data);
      for (size_t i = 0; i < numel; ++i) p[i] = static_cast<uint8_t>(small(rng) & 1);
      return true;
    }
    default:
      return false;
  }
}

bool check_input_file(const std::string& path, size_t numel, size_t elem, std::string* error) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) {
    *error = "cannot open input file " + path;
    return false;
  }
  const std::streamsize n = f.tellg();
  if (n < 0 || static_cast<size_t>(n) != numel * elem) {
    *error = "input file " + path + " has " + std::to_string(n) + " bytes, the method expects " +
             std::to_string(numel * elem) + " (" + std::to_string(numel) + " elements of " + std::to_string(elem) +
             " bytes, logical row-major order)";
    return false;
  }
  return true;
}

bool read_logical(const std::string& path, size_t elem, const std::vector<int64_t>& sizes,
                  const std::vector<int64_t>& strides, void* dst, std::string* error) {
  size_t numel = 1;
  for (int64_t s : sizes) {
    numel *= static_cast<size_t>(s);
  }
  if (!check_input_file(path, numel, elem, error)) {
    return false;
  }
  std::ifstream f(path, std::ios::binary);
  const std::streamsize n = static_cast<std::streamsize>(numel * elem);
  std::vector<uint8_t> buf(numel * elem);
  if (numel * elem > 0 && !f.read(reinterpret_cast<char*>(buf.data()), n)) {
    *error = "cannot read input file " + path;
    return false;
  }
  copy_strided(sizes, strides, elem, buf.data(), static_cast<uint8_t*>(dst), true);
  return true;
}

std::vector<uint8_t> gather_logical(const executorch::aten::Tensor& t) {
  const size_t elem = scalar_size(t.scalar_type());
  std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  std::vector<uint8_t> out(static_cast<size_t>(t.numel()) * elem);
  if (elem == 0 || out.empty()) {
    return out;
  }
  copy_strided(sizes, strides, elem, out.data(), const_cast<uint8_t*>(static_cast<const uint8_t*>(t.const_data_ptr())),
               false);
  return out;
}

double element_as_double(ScalarType t, const uint8_t* p) {
  switch (t) {
    case ScalarType::Float: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case ScalarType::Double: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case ScalarType::Half: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return half_to_float(v);
    }
    case ScalarType::BFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      uint32_t x = static_cast<uint32_t>(v) << 16;
      float f;
      std::memcpy(&f, &x, 4);
      return f;
    }
    case ScalarType::Long: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case ScalarType::Int: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case ScalarType::Bool:
    case ScalarType::Byte:
      return *p;
    default:
      return 0.0;
  }
}

}  // namespace cuda_triton::runner
