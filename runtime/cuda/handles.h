// RAII owners for CUDA driver objects. Each is move-only and frees its object in the destructor; creation
// goes through a factory returning Status so that failures become errors, never crashes.
#pragma once

#include <cstddef>
#include <utility>

#include "common/status.h"
#include "cuda/driver.h"

namespace cuda_triton {

// The Status code of a driver result: out of memory, incompatible code, a device fault (the context is unusable
// afterwards), or another driver error.
Code code_of(CUresult result);

// Converts a driver result into a Status naming the call.
Status check_cu(CUresult result, const char* what);

// The device's primary context, retained for the owner's lifetime.
class PrimaryContext {
 public:
  PrimaryContext() = default;
  ~PrimaryContext() {
    reset();
  }
  PrimaryContext(PrimaryContext&& o) noexcept : device_(o.device_), ctx_(std::exchange(o.ctx_, nullptr)) {}
  PrimaryContext& operator=(PrimaryContext&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = o.device_;
      ctx_ = std::exchange(o.ctx_, nullptr);
    }
    return *this;
  }
  PrimaryContext(const PrimaryContext&) = delete;
  PrimaryContext& operator=(const PrimaryContext&) = delete;

  static Status retain(int ordinal, PrimaryContext* out);
  CUcontext get() const {
    return ctx_;
  }
  CUdevice device() const {
    return device_;
  }

 private:
  void reset();
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
};

// Makes a context current for a scope (push/pop), so callers on any thread work.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext ctx);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  const Status& status() const {
    return status_;
  }

 private:
  bool pushed_ = false;
  Status status_;
};

// Owns one driver handle H (a pointer type): move-only, and released by the static `Derived::release(H)` when
// dropped. Module, Stream and Event are this plus their factory and operations.
template <typename Derived, typename H>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  ~UniqueHandle() {
    reset();
  }
  UniqueHandle(UniqueHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;

  H get() const {
    return h_;
  }

 protected:
  H h_ = nullptr;

 private:
  void reset() {
    if (h_ != nullptr) {
      Derived::release(h_);
      h_ = nullptr;
    }
  }
};

// A CUevent: a fence between streams (no timing), or a timestamp for profiling (`timing`).
class Event : public UniqueHandle<Event, CUevent> {
 public:
  static Status create(Event* out, bool timing = false);

 private:
  friend class UniqueHandle<Event, CUevent>;
  static void release(CUevent e);
};

// A CUDA graph as captured from a stream, and its executable instance.
class Graph : public UniqueHandle<Graph, CUgraph> {
 public:
  // Takes ownership of a graph the driver returned.
  static Graph adopt(CUgraph g) {
    Graph out;
    out.h_ = g;
    return out;
  }

 private:
  friend class UniqueHandle<Graph, CUgraph>;
  static void release(CUgraph g);
};

class GraphExec : public UniqueHandle<GraphExec, CUgraphExec> {
 public:
  static Status instantiate(CUgraph graph, GraphExec* out);

 private:
  friend class UniqueHandle<GraphExec, CUgraphExec>;
  static void release(CUgraphExec e);
};

class Module : public UniqueHandle<Module, CUmodule> {
 public:
  static Status load(const void* image, Module* out);
  Status function(const char* name, CUfunction* out) const;

 private:
  friend class UniqueHandle<Module, CUmodule>;
  static void release(CUmodule m);
};

class Stream : public UniqueHandle<Stream, CUstream> {
 public:
  static Status create(Stream* out);
  Status synchronize() const;
  // Makes `stream` (non-blocking) wait for the work queued so far on the device's default streams, legacy and
  // per-thread, using `marker` (an Event of the stream's context) as the fence.
  static Status wait_for_default_streams(CUstream stream, CUevent marker);

 private:
  friend class UniqueHandle<Stream, CUstream>;
  static void release(CUstream s);
};

// Device memory from cuMemAlloc (256-byte aligned).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    reset();
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, 0)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, 0);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // A zero-byte request gives an empty buffer (null pointer) without calling the driver.
  static Status allocate(size_t bytes, DeviceBuffer* out);
  CUdeviceptr get() const {
    return ptr_;
  }
  size_t bytes() const {
    return bytes_;
  }

 private:
  void reset();
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

// Page-locked host memory from cuMemHostAlloc, used to stage host-planned inputs and outputs.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() {
    reset();
  }
  PinnedBuffer(PinnedBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  static Status allocate(size_t bytes, PinnedBuffer* out);
  void* get() const {
    return ptr_;
  }
  size_t bytes() const {
    return bytes_;
  }

 private:
  void reset();
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace cuda_triton
