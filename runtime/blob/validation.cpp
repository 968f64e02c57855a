// The checks every parsed blob passes (docs/blob_format.md), the same as the Python writer's and reader's
// (backends/cuda_triton/serialization/validation.py): ranges and cross-references, view, arena and state placement,
// the plan's order, each op record's kind checks and shape rule, and lifetimes in the arena.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "blob/encoding.h"
#include "blob/records.h"
#include "generated/elementwise_checks.h"

namespace cuda_triton::blob_detail {

namespace {

constexpr uint64_t kScratchLimit = uint64_t(1) << 40;  // bytes of Triton scratch one launch may ask for

// "cuda_triton/cubin/sm<arch>/" + 40 lowercase hex digits.
bool is_cubin_key(const std::string& key, uint32_t arch) {
  const std::string prefix = "cuda_triton/cubin/sm" + std::to_string(arch) + "/";
  if (key.size() != prefix.size() + 40 || key.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  for (size_t i = prefix.size(); i < key.size(); ++i) {
    const char c = key[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

// Whether two elements share an address: sorted by stride, each dim of size > 1 must step past everything the
// smaller dims reach. The value's span is below 2^48, so nothing here overflows.
bool overlaps_itself(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 0) {
      return false;
    }
    if (sizes[i] > 1) {
      dims.emplace_back(strides[i], sizes[i]);
    }
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) {
      return true;
    }
    reach += stride * (size - 1);
  }
  return false;
}

// No two elements at one address and no gaps: the span is exactly the number of elements x the element size.
bool dense(const ValueRecord& vr) {
  if (overlaps_itself(vr.sizes, vr.strides)) {
    return false;
  }
  uint64_t bytes = element_size(vr.dtype);
  for (int64_t s : vr.sizes) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(s), &bytes)) {
      return false;  // more elements than bytes a value may span
    }
  }
  return bytes == vr.storage_bytes;
}

Status check_header(const Blob& b) {
  if (b.flags != 0) {
    return bad("flags must be 0");
  }
  if (b.archs.empty()) {
    return bad("no target archs");
  }
  if (std::set<uint32_t>(b.archs.begin(), b.archs.end()).size() != b.archs.size()) {
    return bad("duplicate target archs");
  }
  if (b.num_inputs > kMaxCount || b.num_outputs > kMaxCount) {
    return bad("too many delegate inputs/outputs");
  }
  if (!is_pow2(b.arena_alignment) || b.arena_alignment < kMinArenaAlignment || b.arena_alignment > kMaxArenaAlignment) {
    return bad("arena alignment " + std::to_string(b.arena_alignment) + " is not a power of two in [16, 256]");
  }
  if (b.arena_size >= kMaxSpan) {
    return bad("arena size " + std::to_string(b.arena_size));
  }
  if (b.state_size >= kMaxSpan) {
    return bad("state buffer size " + std::to_string(b.state_size));
  }
  return Status::Ok();
}

Status check_kernels(const Blob& b) {
  const std::set<uint32_t> archs(b.archs.begin(), b.archs.end());
  for (size_t k = 0; k < b.kernels.size(); ++k) {
    const KernelRecord& kr = b.kernels[k];
    const std::string w = "kernel " + std::to_string(k) + " (" + kr.name + ")";
    if (kr.name.empty()) {
      return bad(w + ": empty name");
    }
    if (archs.count(kr.arch) == 0) {
      return bad(w + ": arch " + std::to_string(kr.arch) + " is not a target arch of the blob");
    }
    if (!is_cubin_key(kr.cubin_key, kr.arch)) {
      return bad(w + ": cubin key " + kr.cubin_key + " is not the content address cuda_triton/cubin/sm" +
                 std::to_string(kr.arch) + "/<40 hex>");
    }
    if (kr.cubin_size == 0 || kr.cubin_size >= kMaxCubin) {
      return bad(w + ": cubin size " + std::to_string(kr.cubin_size));
    }
    if (kr.num_warps < 1 || kr.num_warps > 32) {
      return bad(w + ": num_warps " + std::to_string(kr.num_warps));
    }
    if (kr.num_ctas < 1 || kr.num_ctas > 16) {
      return bad(w + ": num_ctas " + std::to_string(kr.num_ctas));
    }
    if (!is_pow2(kr.global_scratch_align) || !is_pow2(kr.profile_scratch_align)) {
      return bad(w + ": scratch alignment is not a power of two");
    }
  }
  return Status::Ok();
}

Status check_values(Blob& b) {
  std::set<std::pair<int, uint32_t>> io_seen;
  for (size_t v = 0; v < b.values.size(); ++v) {
    ValueRecord& vr = b.values[v];
    const std::string w = "value " + std::to_string(v);
    CT_RETURN_IF_ERROR(check_dims(w, vr.sizes, &vr.strides));
    if (!storage_bytes(vr.dtype, vr.sizes, vr.strides, &vr.storage_bytes)) {
      return bad(w + ": its span is too large");
    }
    vr.root = static_cast<uint32_t>(v);
    switch (vr.kind) {
      case ValueKind::kInput:
        if (vr.index >= b.num_inputs) {
          return bad(w + ": input index " + std::to_string(vr.index) + " out of range");
        }
        break;
      case ValueKind::kOutput:
        if (vr.index >= b.num_outputs) {
          return bad(w + ": output index " + std::to_string(vr.index) + " out of range");
        }
        break;
      case ValueKind::kIntermediate:
        if (vr.index != 0) {
          return bad(w + ": intermediates have index 0");
        }
        if (vr.offset % b.arena_alignment != 0) {
          return bad(w + ": arena offset " + std::to_string(vr.offset) + " is not aligned");
        }
        if (vr.offset > b.arena_size || vr.storage_bytes > b.arena_size - vr.offset) {
          return bad(w + ": its bytes lie outside the " + std::to_string(b.arena_size) + "-byte arena");
        }
        break;
      case ValueKind::kState:
        if (vr.index != 0) {
          return bad(w + ": state values have index 0");
        }
        if (!dense(vr)) {
          return bad(w + ": a state value must be dense");
        }
        if (vr.offset % b.arena_alignment != 0) {
          return bad(w + ": state offset " + std::to_string(vr.offset) + " is not aligned");
        }
        if (vr.offset > b.state_size || vr.storage_bytes > b.state_size - vr.offset) {
          return bad(w + ": its bytes lie outside the " + std::to_string(b.state_size) + "-byte state buffer");
        }
        break;
      case ValueKind::kView: {
        if (vr.index >= v) {
          return bad(w + ": a view's base must be an earlier value, not " + std::to_string(vr.index));
        }
        const ValueRecord& base = b.values[vr.index];
        if (base.kind == ValueKind::kState) {
          return bad(w + ": a view of state value " + std::to_string(vr.index));
        }
        if (base.dtype != vr.dtype) {
          return bad(w + ": a " + std::string(dtype_name(vr.dtype)) + " view of a " + dtype_name(base.dtype) +
                     " value");
        }
        if (vr.offset % kViewAlignment != 0) {
          return bad(w + ": view offset " + std::to_string(vr.offset) + " is not a multiple of 16");
        }
        if (vr.offset > base.storage_bytes || vr.storage_bytes > base.storage_bytes - vr.offset) {
          return bad(w + ": the view reaches outside its base's " + std::to_string(base.storage_bytes) + " bytes");
        }
        vr.root = base.root;
        break;
      }
    }
    if (vr.kind == ValueKind::kInput || vr.kind == ValueKind::kOutput) {
      if (vr.offset != 0) {
        return bad(w + ": delegate inputs and outputs have offset 0");
      }
      if (!io_seen.insert({static_cast<int>(vr.kind), vr.index}).second) {
        return bad(w + ": delegate input/output described twice");
      }
    }
  }
  for (uint32_t i = 0; i < b.num_outputs; ++i) {
    if (io_seen.count({static_cast<int>(ValueKind::kOutput), i}) == 0) {
      return bad("delegate output " + std::to_string(i) + " has no value record");
    }
  }
  return Status::Ok();
}

Status check_constants(const Blob& b) {
  for (size_t k = 0; k < b.constants.size(); ++k) {
    const ConstantRecord& cr = b.constants[k];
    const std::string w = "constant " + std::to_string(k) + " (" + cr.key + ")";
    if (cr.key.empty()) {
      return bad(w + ": empty key");
    }
    CT_RETURN_IF_ERROR(check_dims(w, cr.sizes, nullptr));
    uint64_t n = element_size(cr.dtype);
    if (std::find(cr.sizes.begin(), cr.sizes.end(), 0) != cr.sizes.end()) {
      n = 0;
    }
    for (int64_t s : cr.sizes) {
      if (__builtin_mul_overflow(n, static_cast<uint64_t>(s), &n)) {
        return bad(w + ": size overflows");
      }
    }
    if (n != cr.nbytes) {
      return bad(w + ": nbytes " + std::to_string(cr.nbytes) + " != " + std::to_string(n) + " from its sizes");
    }
  }
  return Status::Ok();
}

Status check_steps(const std::string& w, const OpRecord& op, const RecordKind& kind) {
  const size_t n_extra = kind.fixed_inputs < 0 ? 0
                                               : op.inputs.size() - static_cast<size_t>(kind.fixed_inputs) -
                                                     prologue_input_count(op);
  return check_step_list(w, op.steps, n_extra, kind.has_result);
}

Status check_launch(const std::string& lw, const LaunchRecord& l, const Blob& b) {
  const std::set<uint32_t> archs(b.archs.begin(), b.archs.end());
  if (l.kernels.size() != b.archs.size()) {
    return bad(lw + ": has kernels for " + std::to_string(l.kernels.size()) + " archs, the blob targets " +
               std::to_string(b.archs.size()));
  }
  for (const auto& [arch, ki] : l.kernels) {
    if (archs.count(arch) == 0) {
      return bad(lw + ": arch " + std::to_string(arch) + " is not a target arch");
    }
  }
  if (l.grid[0] < 1 || l.grid[1] < 1 || l.grid[2] < 1 || l.grid[1] > 65535 || l.grid[2] > 65535) {
    return bad(lw + ": grid out of range");
  }
  for (const auto& [arch, ki] : l.kernels) {
    if (ki >= b.kernels.size()) {
      return bad(lw + ": kernel index " + std::to_string(ki) + " out of range");
    }
    const KernelRecord& kr = b.kernels[ki];
    if (kr.arch != arch) {
      return bad(lw + ": kernel " + std::to_string(ki) + " is for arch " + std::to_string(kr.arch) +
                 ", listed under " + std::to_string(arch));
    }
    if (kr.params.size() != l.args.size()) {
      return bad(lw + ": " + std::to_string(l.args.size()) + " arguments for kernel " + kr.name + " with " +
                 std::to_string(kr.params.size()) + " parameters");
    }
    if (static_cast<uint64_t>(l.grid[0]) * kr.num_ctas > 0x7fffffffull) {
      return bad(lw + ": grid x too large");
    }
    // Scratch buffers are sized per CTA: the total must not wrap around (the runtime would allocate too little).
    const uint64_t ctas = uint64_t(l.grid[0]) * kr.num_ctas * l.grid[1] * l.grid[2];  // < 2^63, checked above
    const uint64_t per_cta = std::max(kr.global_scratch_size, kr.profile_scratch_size);
    uint64_t total = 0;
    if (__builtin_mul_overflow(ctas, per_cta, &total) || total > kScratchLimit) {
      return bad(lw + ": scratch of " + std::to_string(per_cta) + " bytes for each of " + std::to_string(ctas) +
                 " CTAs is too large");
    }
    for (size_t ai = 0; ai < l.args.size(); ++ai) {
      const ArgRecord& a = l.args[ai];
      const ParamType t = kr.params[ai];
      const std::string aw = lw + " arg " + std::to_string(ai);
      const bool is_ptr = a.kind == ArgKind::kValue || a.kind == ArgKind::kConstant || a.kind == ArgKind::kNull;
      if ((t == ParamType::kPtr) != is_ptr || (t == ParamType::kI32 && a.kind != ArgKind::kI32) ||
          (t == ParamType::kI64 && a.kind != ArgKind::kI64) || (t == ParamType::kF32 && a.kind != ArgKind::kF32)) {
        return bad(aw + ": argument kind does not match the kernel's parameter type");
      }
      if (a.kind == ArgKind::kValue && a.ref >= b.values.size()) {
        return bad(aw + ": value " + std::to_string(a.ref) + " out of range");
      }
      if (a.kind == ArgKind::kConstant && a.ref >= b.constants.size()) {
        return bad(aw + ": constant " + std::to_string(a.ref) + " out of range");
      }
      if (a.kind == ArgKind::kI32 &&
          (a.integer < std::numeric_limits<int32_t>::min() || a.integer > std::numeric_limits<int32_t>::max())) {
        return bad(aw + ": i32 value out of range");
      }
    }
  }
  return Status::Ok();
}

Status check_ops(const Blob& b) {
  std::vector<bool> produced(b.values.size(), false);  // by root
  for (size_t v = 0; v < b.values.size(); ++v) {
    produced[v] = b.values[v].kind == ValueKind::kInput;
  }
  for (size_t o = 0; o < b.ops.size(); ++o) {
    const OpRecord& op = b.ops[o];
    const RecordKind& kind = *record_kind(op.kind);
    const std::string w = "op " + std::to_string(o) + " (" + kind.name + (op.name.empty() ? "" : " " + op.name) + ")";
    for (const Operand& x : op.inputs) {
      if (x.kind == OperandKind::kValue && x.index >= b.values.size()) {
        return bad(w + ": input value " + std::to_string(x.index) + " out of range");
      }
      if (x.kind == OperandKind::kConstant && x.index >= b.constants.size()) {
        return bad(w + ": input constant " + std::to_string(x.index) + " out of range");
      }
    }
    std::set<uint32_t> written;
    for (uint32_t v : op.outputs) {
      if (v >= b.values.size()) {
        return bad(w + ": output value " + std::to_string(v) + " out of range");
      }
      if (!written.insert(v).second) {
        return bad(w + ": writes value " + std::to_string(v) + " twice");
      }
    }
    CT_RETURN_IF_ERROR(check_steps(w, op, kind));
    const size_t fixed = kind.fixed_inputs < 0 ? op.inputs.size() : static_cast<size_t>(kind.fixed_inputs);
    if ((!op.steps.empty() || op.inputs.size() > fixed) && op.outputs.size() != 1) {
      return bad(w + ": fused steps need exactly one output");
    }
    if (kind.fixed_inputs > 0) {
      const std::vector<int64_t>& out_sizes = b.values[op.outputs[0]].sizes;
      for (size_t i = fixed; i < op.inputs.size() - prologue_input_count(op); ++i) {
        if (!layout::elementwise_checks::broadcasts_to(operand_sizes(b, op.inputs[i]), out_sizes)) {
          return bad(w + ": an epilogue input does not broadcast to " + dims_to_string(out_sizes));
        }
      }
    }
    for (const Operand& x : op.inputs) {
      if (x.kind == OperandKind::kValue && b.values[x.index].kind == ValueKind::kState) {
        return bad(w + ": state value " + std::to_string(x.index) + " as a record input");
      }
      if (x.kind == OperandKind::kValue && !produced[b.values[x.index].root]) {
        return bad(w + ": reads value " + std::to_string(x.index) + " before any op produces it");
      }
    }
    for (uint32_t v : op.outputs) {
      const ValueRecord& vr = b.values[v];
      if (vr.kind == ValueKind::kState) {
        return bad(w + ": state value " + std::to_string(v) + " as a record output");
      }
      if (b.values[vr.root].kind == ValueKind::kInput) {
        return bad(w + ": writes (a view of) a delegate input");
      }
      if (overlaps_itself(vr.sizes, vr.strides)) {
        return bad(w + ": output value " + std::to_string(v) + " has overlapping elements");
      }
    }
    CT_RETURN_IF_ERROR(kind.check(b, op, w));
    for (size_t li = 0; li < op.launches.size(); ++li) {
      CT_RETURN_IF_ERROR(check_launch(w + " launch " + std::to_string(li), op.launches[li], b));
    }
    for (uint32_t v : op.outputs) {
      produced[b.values[v].root] = true;
    }
  }
  for (size_t v = 0; v < b.values.size(); ++v) {
    if (b.values[v].kind == ValueKind::kOutput && !produced[v]) {
      return bad("delegate output " + std::to_string(b.values[v].index) + " is never written");
    }
  }
  return Status::Ok();
}

// Intermediates live at the same time never share arena bytes. A sweep over ops: a root becomes live at its
// first use; the live roots are kept ordered by offset and pairwise disjoint, so a newcomer only needs checking
// against its neighbours in that order.
Status check_arena(const Blob& b) {
  struct Range {
    size_t first = SIZE_MAX, last = 0;
  };
  std::map<uint32_t, Range> ranges;  // intermediate root -> live range
  for (size_t o = 0; o < b.ops.size(); ++o) {
    const OpRecord& op = b.ops[o];
    auto use = [&](uint64_t v) {
      const uint32_t r = b.values[v].root;
      if (b.values[r].kind == ValueKind::kIntermediate && b.values[r].storage_bytes > 0) {
        Range& range = ranges[r];
        range.first = std::min(range.first, o);
        range.last = o;
      }
    };
    for (const Operand& x : op.inputs) {
      if (x.kind == OperandKind::kValue) {
        use(x.index);
      }
    }
    for (uint32_t v : op.outputs) {
      use(v);
    }
    for (const LaunchRecord& l : op.launches) {
      for (const ArgRecord& a : l.args) {
        if (a.kind == ArgKind::kValue) {
          use(a.ref);
        }
      }
    }
  }
  std::vector<std::pair<size_t, uint32_t>> starts, ends;  // (op, root)
  for (const auto& [root, range] : ranges) {
    starts.emplace_back(range.first, root);
    ends.emplace_back(range.last, root);
  }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  std::set<std::pair<uint64_t, uint32_t>> live;  // (offset, root)
  size_t e = 0;
  for (const auto& [first, root] : starts) {
    for (; e < ends.size() && ends[e].first < first; ++e) {
      const ValueRecord& gone = b.values[ends[e].second];
      live.erase({gone.offset, ends[e].second});
    }
    const ValueRecord& vr = b.values[root];
    const uint64_t lo = vr.offset, hi = vr.offset + vr.storage_bytes;
    auto clash = [&](std::set<std::pair<uint64_t, uint32_t>>::const_iterator it) {
      const ValueRecord& other = b.values[it->second];
      return other.offset < hi && lo < other.offset + other.storage_bytes;
    };
    auto next = live.lower_bound({lo, 0});
    std::string with;
    if (next != live.end() && clash(next)) {
      with = std::to_string(next->second);
    } else if (next != live.begin() && clash(std::prev(next))) {
      with = std::to_string(std::prev(next)->second);
    }
    if (!with.empty()) {
      return bad("intermediates " + std::to_string(root) + " and " + with +
                 " are live at once but share arena bytes");
    }
    live.insert({lo, root});
  }
  return Status::Ok();
}

// State values are live for the whole program: no two share a byte of the state buffer, and each is a launch
// argument of some op (check_ops keeps them out of records' inputs and outputs).
Status check_state(const Blob& b) {
  std::vector<bool> used(b.values.size(), false);
  for (const OpRecord& op : b.ops) {
    for (const LaunchRecord& l : op.launches) {
      for (const ArgRecord& a : l.args) {
        if (a.kind == ArgKind::kValue) {
          used[a.ref] = true;
        }
      }
    }
  }
  std::vector<std::pair<uint64_t, uint32_t>> placed;  // (offset, value) of the non-empty ones
  for (size_t v = 0; v < b.values.size(); ++v) {
    const ValueRecord& vr = b.values[v];
    if (vr.kind != ValueKind::kState) {
      continue;
    }
    if (!used[v]) {
      return bad("state value " + std::to_string(v) + " is not a launch argument of any op");
    }
    if (vr.storage_bytes > 0) {
      placed.emplace_back(vr.offset, static_cast<uint32_t>(v));
    }
  }
  std::sort(placed.begin(), placed.end());
  for (size_t i = 1; i < placed.size(); ++i) {
    const ValueRecord& prev = b.values[placed[i - 1].second];
    if (prev.offset + prev.storage_bytes > placed[i].first) {  // both below 2^48: no overflow
      return bad("state values " + std::to_string(placed[i - 1].second) + " and " + std::to_string(placed[i].second) +
                 " share state bytes");
    }
  }
  return Status::Ok();
}

}  // namespace

Status validate(Blob& b) {
  CT_RETURN_IF_ERROR(check_header(b));
  CT_RETURN_IF_ERROR(check_kernels(b));
  CT_RETURN_IF_ERROR(check_values(b));
  CT_RETURN_IF_ERROR(check_constants(b));
  CT_RETURN_IF_ERROR(check_ops(b));
  CT_RETURN_IF_ERROR(check_arena(b));
  return check_state(b);
}

}  // namespace cuda_triton::blob_detail
