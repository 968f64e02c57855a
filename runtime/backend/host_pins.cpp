#include "backend/host_pins.h"

#include <cstdint>
#include <iterator>
#include <map>
#include <mutex>

namespace cuda_triton {

namespace {
std::mutex g_mutex;
std::map<uintptr_t, size_t> g_pins;  // start -> bytes
}  // namespace

void add_host_pin(const void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_pins[reinterpret_cast<uintptr_t>(ptr)] = bytes;
}

bool remove_host_pin(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_pins.erase(reinterpret_cast<uintptr_t>(ptr)) > 0;
}

bool host_range_pinned(const void* ptr, size_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_pins.upper_bound(begin);
  if (it == g_pins.begin()) {
    return false;
  }
  it = std::prev(it);
  return begin >= it->first && begin + bytes <= it->first + it->second;
}

}  // namespace cuda_triton
