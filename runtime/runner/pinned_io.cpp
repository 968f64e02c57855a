#include "runner/pinned_io.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda_triton_backend.h"

namespace cuda_triton::runner {

using executorch::runtime::EValue;
using executorch::runtime::Method;

namespace {

struct HostRange {
  uintptr_t begin = 0;
  uintptr_t end = 0;
};

// Ranges sorted by address, with ranges that share a page merged (the driver page-locks whole pages, and a page
// cannot be registered twice).
std::vector<HostRange> merge_by_page(std::vector<HostRange> ranges, uintptr_t page_bytes) {
  ranges.erase(std::remove_if(ranges.begin(), ranges.end(), [](const HostRange& r) { return r.end <= r.begin; }),
               ranges.end());
  std::sort(ranges.begin(), ranges.end(), [](const HostRange& a, const HostRange& b) { return a.begin < b.begin; });
  std::vector<HostRange> merged;
  for (const HostRange& r : ranges) {
    if (!merged.empty() && r.begin / page_bytes <= (merged.back().end - 1) / page_bytes) {
      merged.back().end = std::max(merged.back().end, r.end);
    } else {
      merged.push_back(r);
    }
  }
  return merged;
}

}  // namespace

size_t PinnedIo::pin(const Method& method) {
  std::vector<HostRange> ranges;
  const auto add = [&](const EValue& v) {
    // Device-resident I/O (cuda_triton.device_io) has no host side to pin.
    if (v.isTensor() && v.toTensor().nbytes() > 0 && v.toTensor().const_data_ptr() != nullptr &&
        v.toTensor().device_type() == executorch::runtime::etensor::DeviceType::CPU) {
      const auto begin = reinterpret_cast<uintptr_t>(v.toTensor().const_data_ptr());
      ranges.push_back({begin, begin + v.toTensor().nbytes()});
    }
  };
  for (size_t i = 0; i < method.inputs_size(); ++i) {
    add(method.get_input(i));
  }
  for (size_t i = 0; i < method.outputs_size(); ++i) {
    add(method.get_output(i));
  }
  const long page = sysconf(_SC_PAGESIZE);
  size_t bytes = 0;
  for (const HostRange& r : merge_by_page(std::move(ranges), page > 0 ? static_cast<uintptr_t>(page) : 4096)) {
    void* p = reinterpret_cast<void*>(r.begin);
    if (cuda_triton_backend_pin_host_memory(p, r.end - r.begin) == 0) {
      pinned_.push_back(p);
      bytes += r.end - r.begin;
    }
  }
  return bytes;
}

void PinnedIo::release() {
  for (void* p : pinned_) {
    (void)cuda_triton_backend_unpin_host_memory(p);
  }
  pinned_.clear();
}

PinnedIo::~PinnedIo() {
  release();
}

}  // namespace cuda_triton::runner
