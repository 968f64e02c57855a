// cuda_triton_runner: loads a .pte (and optional .ptd), feeds inputs from files or random data, runs the
// method N times and prints latency statistics; writes outputs. Flags follow ExecuTorch's executor_runner
// (--model_path --data_path --inputs --output_file --print_output --num_executions --method_name
// --etdump_path) plus --warmup and --seed. Any error: a message on stderr and a non-zero exit code.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor_ptr.h>
#include <executorch/runtime/backend/backend_options_map.h>
#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/platform/runtime.h>
#if defined(CUDA_TRITON_HAVE_ETDUMP)
#include <executorch/devtools/etdump/etdump_flatcc.h>
#endif

#include "backend/cuda_triton_backend.h"
#include "runner/device_io.h"
#include "runner/flags.h"
#include "runner/load_cycles.h"
#include "runner/pinned_io.h"
#include "runner/program_check.h"
#include "runner/tensor_io.h"

using executorch::extension::Module;
using executorch::extension::TensorPtr;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::Method;
using executorch::runtime::Tag;
using namespace cuda_triton::runner;

namespace {

const char* error_name(Error e) {
  switch (e) {
    case Error::Ok: return "Ok";
    case Error::Internal: return "Internal";
    case Error::InvalidState: return "InvalidState";
    case Error::NotSupported: return "NotSupported";
    case Error::NotImplemented: return "NotImplemented";
    case Error::InvalidArgument: return "InvalidArgument";
    case Error::InvalidType: return "InvalidType";
    case Error::OperatorMissing: return "OperatorMissing";
    case Error::NotFound: return "NotFound";
    case Error::MemoryAllocationFailed: return "MemoryAllocationFailed";
    case Error::AccessFailed: return "AccessFailed";
    case Error::InvalidProgram: return "InvalidProgram";
    case Error::InvalidExternalData: return "InvalidExternalData";
    case Error::OutOfResources: return "OutOfResources";
    case Error::DelegateInvalidCompatibility: return "DelegateInvalidCompatibility";
    case Error::DelegateMemoryAllocationFailed: return "DelegateMemoryAllocationFailed";
    case Error::DelegateInvalidHandle: return "DelegateInvalidHandle";
    default: return "Error";
  }
}

int fail(const std::string& what, Error e) {
  std::fprintf(stderr, "cuda_triton_runner: error: %s: %s (0x%x)\n", what.c_str(), error_name(e),
               static_cast<unsigned>(e));
  const std::string last = cuda_triton_backend_last_error();
  if (!last.empty()) {
    std::fprintf(stderr, "cuda_triton_runner: %s\n", last.c_str());
  }
  const std::string status = cuda_triton_backend_status();
  if (status != "ok" && last.find(status) == std::string::npos) {
    std::fprintf(stderr, "cuda_triton_runner: CudaTritonBackend status: %s\n", status.c_str());
  }
  return 1;
}

int fail(const std::string& what) {
  std::fprintf(stderr, "cuda_triton_runner: error: %s\n", what.c_str());
  return 1;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Inputs the runner allocates host memory for: above this the program is taken to be corrupted.
constexpr uint64_t kMaxInputBytes = uint64_t(1) << 34;

bool file_exists(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return static_cast<bool>(f);
}

}  // namespace

static int runner_main(int argc, char** argv);

// Everything ExecuTorch or the runner throws (a corrupted program can make ExecuTorch's loader ask for absurd
// allocations) ends as an error message and exit code 1.
int main(int argc, char** argv) {
  try {
    return runner_main(argc, argv);
  } catch (const std::bad_alloc&) {
    return fail("out of host memory (a corrupted program can ask for absurd sizes)");
  } catch (const std::exception& e) {
    return fail(std::string("unexpected exception: ") + e.what());
  }
}

static int runner_main(int argc, char** argv) {
  executorch::runtime::runtime_init();
  Flags flags;
  flags.define("model_path", "", "the .pte file to run (required)");
  flags.define("data_path", "", "a .ptd file with external weights (export_pte.py --external-weights)");
  flags.define("inputs", "", "comma-separated raw input files, one per method input, elements in logical row-major "
                             "order; random inputs when empty");
  flags.define("output_file", "", "write every output's elements (logical row-major order, concatenated) here");
  flags.define("print_output", "false", "print the first elements of every output", true);
  flags.define("num_executions", "10", "timed executions");
  flags.define("warmup", "1", "untimed executions before timing");
  flags.define("method_name", "forward", "the method to run");
  flags.define("etdump_path", "", "write an ETDump trace of the timed executions here");
  flags.define("seed", "0", "seed of the random inputs");
  flags.define("no_cuda_graph", "false", "launch every delegate's kernels one by one instead of replaying a CUDA "
                                         "graph (backend option cuda_graph=false)", true);
  flags.define("cuda_graph_io", "", "how graphs meet device-resident inputs/outputs: update (rewrite kernel "
                                    "arguments when an address changes) or staging (copy through fixed buffers); "
                                    "empty: the backend's default (backend option cuda_graph_io)");
  flags.define("no_op_profile", "false", "with --etdump_path: record only ExecuTorch's own events, not every op's GPU "
                                         "time (backend option profile_ops=false; delegates then replay their "
                                         "graphs, so DELEGATE_CALL is the host time of a replay)", true);
  flags.define("no_pin_io", "false", "leave the program's host inputs and outputs pageable instead of page-locking "
                                     "them for the host<->device copies of a device-planned program", true);
  flags.define("load_cycles", "0", "after the run: load the program, execute once and destroy it this many times, "
                                   "printing device and host memory (a leak per load shows as growth)");
  std::string err;
  if (!flags.parse(argc, argv, &err)) {
    std::fprintf(stderr, "cuda_triton_runner: error: %s\n\n%s", err.c_str(), flags.usage(argv[0]).c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.usage(argv[0]).c_str());
    return 0;
  }
  int64_t num_executions = 0, warmup = 0, seed = 0, load_cycles = 0;
  if (!flags.integer("num_executions", &num_executions, &err) || !flags.integer("warmup", &warmup, &err) ||
      !flags.integer("seed", &seed, &err) || !flags.integer("load_cycles", &load_cycles, &err)) {
    return fail(err);
  }
  if (num_executions < 1 || warmup < 0 || load_cycles < 0) {
    return fail("--num_executions must be >= 1, --warmup and --load_cycles >= 0");
  }
  const std::string model_path = flags.str("model_path");
  const std::string data_path = flags.str("data_path");
  const std::string method_name = flags.str("method_name");
  if (model_path.empty()) {
    std::fprintf(stderr, "cuda_triton_runner: error: --model_path is required\n\n%s", flags.usage(argv[0]).c_str());
    return 2;
  }
  if (!file_exists(model_path)) {
    return fail("cannot open --model_path " + model_path);
  }
  if (!check_program_file(model_path, &err)) {
    return fail("loading program " + model_path + ": " + err);
  }
  if (!data_path.empty() && !file_exists(data_path)) {
    return fail("cannot open --data_path " + data_path);
  }
  if (cuda_triton_backend_registered() == 0) {
    return fail("CudaTritonBackend is not registered: " + std::string(cuda_triton_backend_status()));
  }
  std::printf("CudaTritonBackend: %s\n", cuda_triton_backend_status());

  // Load-time backend options (BackendInitContext::runtime_specs of every delegate of the program).
  executorch::runtime::BackendOptions<3> backend_options;
  if (flags.boolean("no_cuda_graph")) {
    backend_options.set_option("cuda_graph", false);
  }
  if (flags.boolean("no_op_profile")) {
    backend_options.set_option("profile_ops", false);
  }
  const std::string graph_io = flags.str("cuda_graph_io");
  if (!graph_io.empty()) {
    if (graph_io != "update" && graph_io != "staging") {
      return fail("--cuda_graph_io must be update or staging, got '" + graph_io + "'");
    }
    backend_options.set_option("cuda_graph_io", graph_io.c_str());
  }
  executorch::runtime::LoadBackendOptionsMap options_map;
  if (options_map.set_options(cuda_triton::kBackendName, backend_options.view()) != Error::Ok) {
    return fail("cannot pass the backend options");
  }

  std::unique_ptr<executorch::runtime::EventTracer> tracer;
#if defined(CUDA_TRITON_HAVE_ETDUMP)
  executorch::etdump::ETDumpGen* etdump = nullptr;
  if (!flags.str("etdump_path").empty()) {
    auto gen = std::make_unique<executorch::etdump::ETDumpGen>();
    etdump = gen.get();
    tracer = std::move(gen);
  }
#else
  if (!flags.str("etdump_path").empty()) {
    return fail("--etdump_path: this runner was built without the executorch etdump library");
  }
#endif
  std::unique_ptr<Module> module =
      data_path.empty() ? std::make_unique<Module>(model_path, Module::LoadMode::File, std::move(tracer))
                        : std::make_unique<Module>(model_path, data_path, Module::LoadMode::File, std::move(tracer));
  // The flatbuffer verifier runs on the whole program: a corrupted .pte is refused here, not found by a crash.
  Error e = module->load(options_map, executorch::runtime::Program::Verification::InternalConsistency);
  if (e != Error::Ok) {
    return fail("loading program " + model_path, e);
  }
  auto meta = module->method_meta(method_name);
  if (!meta.ok()) {
    return fail("method '" + method_name + "' not found in " + model_path, meta.error());
  }

  // Inputs: from files or random, laid out in the dim order the program planned.
  const std::vector<std::string> files = split_commas(flags.str("inputs"));
  if (!files.empty() && files.size() != meta->num_inputs()) {
    return fail("--inputs lists " + std::to_string(files.size()) + " files, method '" + method_name + "' has " +
                std::to_string(meta->num_inputs()) + " inputs");
  }
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<std::vector<uint8_t>> storage(meta->num_inputs());
  std::vector<TensorPtr> tensors;
  std::vector<EValue> inputs;
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    auto tag = meta->input_tag(i);
    if (!tag.ok() || *tag != Tag::Tensor) {
      return fail("input " + std::to_string(i) + " is not a tensor; only tensor inputs are supported");
    }
    auto info = meta->input_tensor_meta(i);
    if (!info.ok()) {
      return fail("input " + std::to_string(i) + " has no tensor metadata", info.error());
    }
    std::vector<int64_t> sizes(info->sizes().begin(), info->sizes().end());
    std::vector<uint8_t> dim_order(info->dim_order().begin(), info->dim_order().end());
    const ScalarType st = info->scalar_type();
    const size_t elem = scalar_size(st);
    if (elem == 0) {
      return fail("input " + std::to_string(i) + " has an unsupported dtype");
    }
    uint64_t nbytes = 0;
    if (!check_tensor_meta(sizes, dim_order, elem, kMaxInputBytes, &nbytes, &err)) {
      return fail("input " + std::to_string(i) + " of method '" + method_name + "' " + err);
    }
    std::vector<int64_t> strides = strides_from_dim_order(sizes, dim_order);
    const size_t numel = static_cast<size_t>(nbytes / elem);
    if (!files.empty() && !check_input_file(files[i], numel, elem, &err)) {
      return fail(err);  // before allocating what a corrupted program may claim
    }
    storage[i].assign(std::max<size_t>(static_cast<size_t>(nbytes), 1), 0);
    if (files.empty()) {
      if (!fill_random(st, storage[i].data(), numel, rng)) {
        return fail("input " + std::to_string(i) + ": cannot make random data of dtype " + scalar_name(st));
      }
    } else if (!read_logical(files[i], elem, sizes, strides, storage[i].data(), &err)) {
      return fail(err);
    }
    std::vector<executorch::aten::SizesType> s32(sizes.begin(), sizes.end());
    std::vector<executorch::aten::DimOrderType> d32(dim_order.begin(), dim_order.end());
    std::vector<executorch::aten::StridesType> st32(strides.begin(), strides.end());
    tensors.push_back(executorch::extension::make_tensor_ptr(std::move(s32), storage[i].data(), std::move(d32),
                                                             std::move(st32), st));
    inputs.emplace_back(tensors.back());
    std::printf("input %zu: %s [", i, scalar_name(st));
    for (size_t d = 0; d < sizes.size(); ++d) std::printf("%s%lld", d ? ", " : "", static_cast<long long>(sizes[d]));
    std::printf("]%s\n", files.empty() ? " (random)" : "");
  }

  e = module->load_method(method_name);
  if (e != Error::Ok) {
    return fail("loading method '" + method_name + "'", e);
  }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  auto method_result = module->method(method_name);
#pragma GCC diagnostic pop
  if (!method_result.ok()) {
    return fail("method '" + method_name + "'", method_result.error());
  }
  Method* method = *method_result;
  std::printf("CudaTritonBackend: %s\n", cuda_triton_backend_execution_summary());
  // Declared after the module: the device buffers go before the method that points at them.
  DeviceResidentIo device_io;
  if (!device_io.prepare_inputs(*method, tensors, inputs, &err) || !device_io.prepare_outputs(*method, &err)) {
    return fail(err);
  }
  if (device_io.active()) {
    std::printf("device-resident I/O: %zu inputs copied to device memory once, %zu outputs left there; every "
                "execution is timed to the end of its GPU work\n",
                device_io.num_inputs(), device_io.num_outputs());
  }
  // Declared after the module, so the pins are released before the method's memory is.
  cuda_triton::runner::PinnedIo pinned_io;
  if (!flags.boolean("no_pin_io")) {
    std::printf("page-locked %zu bytes of program I/O\n", pinned_io.pin(*method));
  }
  // Inputs are set before EVERY execution: ExecuTorch's memory plan places planned inputs in the shared arena
  // and reuses their bytes for later tensors once they are dead (e.g. the demo's final output overwrites its
  // input), so an input set once is clobbered by the first execution and later ones would read garbage.
  const auto set_inputs = [&]() -> Error {
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Error se = method->set_input(inputs[i], i);
      if (se != Error::Ok) {
        return se;
      }
    }
    return Error::Ok;
  };

  for (int64_t i = 0; i < warmup; ++i) {
    e = set_inputs();
    if (e != Error::Ok) {
      return fail("setting the inputs", e);
    }
    e = method->execute();
    if (e != Error::Ok) {
      return fail("warmup execution " + std::to_string(i), e);
    }
    if (device_io.active() && !DeviceResidentIo::synchronize(&err)) {
      return fail("warmup execution " + std::to_string(i) + ": " + err);
    }
  }
  std::vector<double> ms;
  cuda_triton_backend_reset_execute_time();
  for (int64_t i = 0; i < num_executions; ++i) {
    e = set_inputs();
    if (e != Error::Ok) {
      return fail("setting the inputs", e);
    }
    const auto t0 = std::chrono::steady_clock::now();
    e = method->execute();
    // A program with device-resident outputs returns before its GPU work ends (nothing copies them out).
    const bool synced = e == Error::Ok && (!device_io.active() || DeviceResidentIo::synchronize(&err));
    const auto t1 = std::chrono::steady_clock::now();
    if (e != Error::Ok) {
      return fail("execution " + std::to_string(i), e);
    }
    if (!synced) {
      return fail("execution " + std::to_string(i) + ": " + err);
    }
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  double mean = 0;
  for (double v : ms) mean += v;
  mean /= static_cast<double>(ms.size());
  std::printf("latency over %lld executions (after %lld warmup): min %.4f ms, median %.4f ms, p90 %.4f ms, mean %.4f ms\n",
              static_cast<long long>(num_executions), static_cast<long long>(warmup),
              *std::min_element(ms.begin(), ms.end()), percentile(ms, 0.5), percentile(ms, 0.9), mean);
  unsigned long long calls = 0, median_ns = 0, min_ns = 0, max_ns = 0;
  cuda_triton_backend_execute_time(&calls, &median_ns, &min_ns, &max_ns);
  if (calls > 0) {
    std::printf("CudaTritonBackend execute host time: median %.2f us, min %.2f us, max %.2f us over %llu delegate "
                "calls (%llu per execution)\n",
                static_cast<double>(median_ns) / 1e3, static_cast<double>(min_ns) / 1e3,
                static_cast<double>(max_ns) / 1e3, calls, calls / static_cast<unsigned long long>(num_executions));
  }

  // Outputs.
  std::ofstream out;
  if (!flags.str("output_file").empty()) {
    out.open(flags.str("output_file"), std::ios::binary | std::ios::trunc);
    if (!out) {
      return fail("cannot write --output_file " + flags.str("output_file"));
    }
  }
  for (size_t i = 0; i < method->outputs_size(); ++i) {
    const EValue& v = method->get_output(i);
    if (!v.isTensor()) {
      std::printf("output %zu: (not a tensor)\n", i);
      continue;
    }
    std::vector<uint8_t> copied;
    TensorPtr host;
    if (!DeviceResidentIo::host_view(v.toTensor(), &copied, &host, &err)) {
      return fail("output " + std::to_string(i) + ": " + err);
    }
    const auto& t = *host;
    std::printf("output %zu: %s [", i, scalar_name(t.scalar_type()));
    for (size_t d = 0; d < t.sizes().size(); ++d) std::printf("%s%d", d ? ", " : "", static_cast<int>(t.sizes()[d]));
    std::printf("]\n");
    const std::vector<uint8_t> data = gather_logical(t);
    const size_t elem = scalar_size(t.scalar_type());
    if (flags.boolean("print_output") && elem > 0) {
      const size_t n = std::min<size_t>(data.size() / elem, 16);
      std::printf("  ");
      for (size_t k = 0; k < n; ++k) std::printf("%s%.6g", k ? ", " : "", element_as_double(t.scalar_type(), data.data() + k * elem));
      std::printf("%s\n", data.size() / elem > n ? ", ..." : "");
    }
    if (out.is_open()) {
      out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    }
  }
  if (out.is_open()) {
    out.close();
    if (!out) {
      return fail("writing --output_file " + flags.str("output_file"));
    }
    std::printf("wrote outputs to %s\n", flags.str("output_file").c_str());
  }
#if defined(CUDA_TRITON_HAVE_ETDUMP)
  if (etdump != nullptr) {
    auto result = etdump->get_etdump_data();
    if (result.buf != nullptr && result.size > 0) {
      std::ofstream f(flags.str("etdump_path"), std::ios::binary | std::ios::trunc);
      f.write(static_cast<const char*>(result.buf), static_cast<std::streamsize>(result.size));
      free(result.buf);
      if (!f) {
        return fail("writing --etdump_path " + flags.str("etdump_path"));
      }
      std::printf("wrote ETDump to %s\n", flags.str("etdump_path").c_str());
    }
  }
#endif
  if (load_cycles > 0) {
    module.reset();  // only the cycles' own loads are alive while they run
    LoadCycleOptions cycles;
    cycles.model_path = model_path;
    cycles.data_path = data_path;
    cycles.method_name = method_name;
    cycles.cycles = load_cycles;
    cycles.backend_options = &options_map;
    if (!run_load_cycles(cycles, inputs, &err)) {
      return fail(err);
    }
  }
  return 0;
}
