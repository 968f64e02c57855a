#include "runner/load_cycles.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include <executorch/extension/module/module.h>

#include "backend/cuda_triton_backend.h"
#include "runner/device_io.h"

namespace cuda_triton::runner {

using executorch::extension::Module;
using executorch::runtime::Error;
using executorch::runtime::EValue;

namespace {

uint64_t host_rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t device_used_bytes() {
  unsigned long long free_bytes = 0, total_bytes = 0;
  if (cuda_triton_backend_device_memory(0, &free_bytes, &total_bytes) != 0) {
    return 0;
  }
  return total_bytes - free_bytes;
}

bool failed(std::string* error, int64_t cycle, const std::string& what, Error e) {
  *error = "load cycle " + std::to_string(cycle) + ": " + what + " failed (error " +
           std::to_string(static_cast<int>(e)) + ")";
  const std::string last = cuda_triton_backend_last_error();
  if (!last.empty()) {
    *error += ": " + last;
  }
  return false;
}

}  // namespace

bool run_load_cycles(const LoadCycleOptions& options, const std::vector<EValue>& inputs, std::string* error) {
  const int64_t every = options.cycles >= 10 ? options.cycles / 10 : 1;
  for (int64_t i = 1; i <= options.cycles; ++i) {
    {
      std::unique_ptr<Module> module =
          options.data_path.empty()
              ? std::make_unique<Module>(options.model_path, Module::LoadMode::File)
              : std::make_unique<Module>(options.model_path, options.data_path, Module::LoadMode::File);
      const auto verification = executorch::runtime::Program::Verification::InternalConsistency;
      Error e = options.backend_options ? module->load(*options.backend_options, verification)
                                        : module->load(verification);
      if (e != Error::Ok) {
        return failed(error, i, "loading the program", e);
      }
      e = module->load_method(options.method_name);
      if (e != Error::Ok) {
        return failed(error, i, "loading method '" + options.method_name + "'", e);
      }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
      auto method = module->method(options.method_name);
#pragma GCC diagnostic pop
      if (!method.ok()) {
        return failed(error, i, "getting method '" + options.method_name + "'", method.error());
      }
      // `inputs` are the main run's: already in device memory where the program wants them there.
      DeviceResidentIo device_io;
      std::string why;
      if (!device_io.prepare_outputs(**method, &why)) {
        *error = "load cycle " + std::to_string(i) + ": " + why;
        return false;
      }
      auto out = module->execute(options.method_name, inputs);
      if (!out.ok()) {
        return failed(error, i, "executing", out.error());
      }
      if (device_io.active() && !DeviceResidentIo::synchronize(&why)) {
        *error = "load cycle " + std::to_string(i) + ": " + why;
        return false;
      }
    }  // the module, its method and every delegate are destroyed here
    if (i == 1 || i % every == 0 || i == options.cycles) {
      std::printf("load cycle %lld: device used %llu bytes, host rss %llu bytes\n", static_cast<long long>(i),
                  static_cast<unsigned long long>(device_used_bytes()),
                  static_cast<unsigned long long>(host_rss_bytes()));
      std::fflush(stdout);
    }
  }
  return true;
}

}  // namespace cuda_triton::runner
