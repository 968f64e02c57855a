// RAII owners for CUDA driver objects. Each is move-only and frees its object in the destructor; creation
// goes through a factory returning Status so that failures become errors, never crashes.
#pragma once

#include <cstddef>
#include <utility>

#include "common/status.h"
#include "cuda/driver.h"

namespace cuda_triton {

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

// A CUevent without timing (a fence between streams).
class Event {
 public:
  Event() = default;
  ~Event() {
    reset();
  }
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    if (this != &o) {
      reset();
      e_ = std::exchange(o.e_, nullptr);
    }
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  static Status create(Event* out);
  CUevent get() const {
    return e_;
  }

 private:
  void reset();
  CUevent e_ = nullptr;
};

class Module {
 public:
  Module() = default;
  ~Module() {
    reset();
  }
  Module(Module&& o) noexcept : mod_(std::exchange(o.mod_, nullptr)) {}
  Module& operator=(Module&& o) noexcept {
    if (this != &o) {
      reset();
      mod_ = std::exchange(o.mod_, nullptr);
    }
    return *this;
  }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  static Status load(const void* image, Module* out);
  Status function(const char* name, CUfunction* out) const;
  CUmodule get() const {
    return mod_;
  }

 private:
  void reset();
  CUmodule mod_ = nullptr;
};

class Stream {
 public:
  Stream() = default;
  ~Stream() {
    reset();
  }
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    if (this != &o) {
      reset();
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  static Status create(Stream* out);
  Status synchronize() const;
  // Makes this (non-blocking) stream wait for the work queued so far on the device's default streams, legacy and
  // per-thread, using ``marker`` (an Event of this stream's context) as the fence.
  Status wait_for_default_streams(CUevent marker) const;
  CUstream get() const {
    return s_;
  }

 private:
  void reset();
  CUstream s_ = nullptr;
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
