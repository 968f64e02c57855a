// Test harness: evaluates the generated layout rule (runtime/generated/conv_layout.h) on cases read from
// stdin, one per line, so tests/test_runtime_layout.py can compare it with the Python rule.
// Line: n_in <in sizes> <in strides> n_w <w sizes> <w strides> n_sp <stride> <pad_before> <pad_after>
//       <dilation> <output_padding> <transposed> <groups> <is_float64>
// Output: "OK <rank> <sizes> <strides>" or "ERR <what>".
#include <exception>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "generated/conv_layout.h"

namespace {
bool read_n(std::istream& is, size_t n, std::vector<int64_t>* v) {
  v->resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!(is >> (*v)[i])) return false;
  }
  return true;
}
}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    std::istringstream is(line);
    size_t n_in = 0, n_w = 0, n_sp = 0;
    std::vector<int64_t> in_s, in_st, w_s, w_st, stride, pb, pa, dil, op;
    int64_t transposed = 0, groups = 0, f64 = 0;
    bool ok = (is >> n_in) && n_in <= 8 && read_n(is, n_in, &in_s) && read_n(is, n_in, &in_st) && (is >> n_w) &&
              n_w <= 8 && read_n(is, n_w, &w_s) && read_n(is, n_w, &w_st) && (is >> n_sp) && n_sp <= 8 &&
              read_n(is, n_sp, &stride) && read_n(is, n_sp, &pb) && read_n(is, n_sp, &pa) &&
              read_n(is, n_sp, &dil) && read_n(is, n_sp, &op) && (is >> transposed >> groups >> f64);
    if (!ok) {
      std::cout << "ERR parse\n";
      continue;
    }
    try {
      auto r = cuda_triton::layout::out_shape_and_stride(in_s, in_st, w_s, w_st, stride, pb, pa, dil, transposed != 0,
                                                         op, groups, f64 != 0);
      std::cout << "OK " << r.first.size();
      for (int64_t x : r.first) std::cout << ' ' << x;
      for (int64_t x : r.second) std::cout << ' ' << x;
      std::cout << '\n';
    } catch (const std::exception& e) {
      std::cout << "ERR " << e.what() << '\n';
    }
  }
  return 0;
}
