#include "backend/runtime_options.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <variant>

#include <executorch/runtime/platform/log.h>

namespace cuda_triton {

using executorch::runtime::ArrayRef;
using executorch::runtime::BackendOption;
using executorch::runtime::CompileSpec;
using executorch::runtime::Span;

namespace {

constexpr const char* kKeyGraph = "cuda_graph";
constexpr const char* kKeyGraphIo = "cuda_graph_io";
constexpr const char* kKeyProfileOps = "profile_ops";

std::mutex g_mutex;

bool parse_graph_io(const std::string& text, GraphIo* out) {
  if (text == "update") {
    *out = GraphIo::kUpdate;
    return true;
  }
  if (text == "staging") {
    *out = GraphIo::kStaging;
    return true;
  }
  return false;
}

// ExecuTorch 1.5.1 hands over a compile spec whose key or value is missing from a (corrupted) program as the
// address of a field of a null flatbuffer object: a small non-null number. Such a spec is skipped.
bool plausible_pointer(const void* p) {
  return reinterpret_cast<uintptr_t>(p) >= 4096;
}

Status flag_option(const BackendOption& option, bool* out) {
  if (const bool* b = std::get_if<bool>(&option.value)) {
    *out = *b;
  } else if (const int* i = std::get_if<int>(&option.value)) {
    *out = *i != 0;
  } else {
    return Status(Code::kInvalidArgument, std::string("backend option ") + option.key + " must be a bool");
  }
  return Status::Ok();
}

// Applies one backend option to (graph, io, profile_ops); unknown keys are left alone.
Status apply_option(const BackendOption& option, bool* graph, GraphIo* io, bool* profile_ops) {
  if (std::strcmp(option.key, kKeyGraph) == 0) {
    CT_RETURN_IF_ERROR(flag_option(option, graph));
  } else if (std::strcmp(option.key, kKeyProfileOps) == 0) {
    CT_RETURN_IF_ERROR(flag_option(option, profile_ops));
  } else if (std::strcmp(option.key, kKeyGraphIo) == 0) {
    const auto* text = std::get_if<std::array<char, executorch::runtime::kMaxOptionValueLength>>(&option.value);
    if (text == nullptr || !parse_graph_io(text->data(), io)) {
      return Status(Code::kInvalidArgument, "backend option cuda_graph_io must be \"update\" or \"staging\"");
    }
  }
  return Status::Ok();
}

}  // namespace

const char* graph_io_name(GraphIo io) {
  return io == GraphIo::kUpdate ? "update" : "staging";
}

RuntimeOptions::RuntimeOptions() {
  if (const char* v = std::getenv("CUDA_TRITON_CUDA_GRAPH")) {
    cuda_graph_ = !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 || std::strcmp(v, "off") == 0);
  }
  if (const char* v = std::getenv("CUDA_TRITON_CUDA_GRAPH_IO")) {
    if (!parse_graph_io(v, &graph_io_)) {
      ET_LOG(Error, "CudaTritonBackend: CUDA_TRITON_CUDA_GRAPH_IO=%s is neither update nor staging; using %s", v,
             graph_io_name(graph_io_));
    }
  }
}

RuntimeOptions& RuntimeOptions::get() {
  static RuntimeOptions options;
  return options;
}

Status RuntimeOptions::apply(Span<const BackendOption> options) {
  std::lock_guard<std::mutex> lock(g_mutex);
  bool graph = cuda_graph_, profile_ops = profile_ops_;
  GraphIo io = graph_io_;
  for (const BackendOption& o : options) {
    CT_RETURN_IF_ERROR(apply_option(o, &graph, &io, &profile_ops));
  }
  cuda_graph_ = graph;
  graph_io_ = io;
  profile_ops_ = profile_ops;
  return Status::Ok();
}

Status delegate_options(ArrayRef<CompileSpec> compile_specs, Span<const BackendOption> runtime_specs,
                        DelegateOptions* out) {
  DelegateOptions options;
  bool graph_allowed = true;
  for (const CompileSpec& s : compile_specs) {
    if (!plausible_pointer(s.key) || !plausible_pointer(s.value.buffer)) {
      continue;
    }
    const std::string v(static_cast<const char*>(s.value.buffer), s.value.nbytes);
    if (std::strcmp(s.key, "target_device") == 0 && v.rfind("cuda", 0) == 0) {
      options.io_on_device = true;
      const size_t colon = v.find(':');
      if (colon != std::string::npos) {
        char* end = nullptr;
        const long n = std::strtol(v.c_str() + colon + 1, &end, 10);
        if (end != v.c_str() + colon + 1 && n >= 0 && n < 1024) {
          options.device = static_cast<int>(n);
        }
      }
    } else if (std::strcmp(s.key, kKeyGraph) == 0) {
      graph_allowed = !(v == "0" || v == "false" || v == "off");
    }
  }
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    options.cuda_graph = RuntimeOptions::get().cuda_graph();
    options.graph_io = RuntimeOptions::get().graph_io();
    options.profile_ops = RuntimeOptions::get().profile_ops();
  }
  for (const BackendOption& o : runtime_specs) {
    CT_RETURN_IF_ERROR(apply_option(o, &options.cuda_graph, &options.graph_io, &options.profile_ops));
  }
  options.cuda_graph = options.cuda_graph && graph_allowed;
  *out = options;
  return Status::Ok();
}

}  // namespace cuda_triton
