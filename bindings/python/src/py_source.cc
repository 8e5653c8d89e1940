// Sources and a Sink over Python objects (see py_source.h).
#include "py_source.h"

#include <nanobind/stl/string.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

namespace jtpy {
namespace {

// Python objects are released with the GIL held, whichever thread drops the last reference
// to the backend (the Reader may be released by a thread without it). At interpreter exit
// they are left alone: taking the GIL then can hang.
void release_with_gil(nb::object& o) {
  if (!o.is_valid()) return;
  if (!Py_IsInitialized()) {
    o.release();
    return;
  }
  nb::gil_scoped_acquire gil;
  o.reset();
}

// "Type: message" of a Python exception (what() would add the whole traceback). With the GIL.
std::string describe(const nb::python_error& e) {
  try {
    nb::handle v = e.value();
    std::string type = nb::cast<std::string>(nb::str(v.type().attr("__name__")));
    std::string msg = nb::cast<std::string>(nb::str(v));
    return msg.empty() ? type : type + ": " + msg;
  } catch (...) {  // (a __str__ that raises: the type is still worth naming)
    return "a Python exception";
  }
}

// A lock on `mu`, for a caller that holds the GIL: a thread holding `mu` may be waiting for the
// GIL, so when `mu` is taken, the GIL is let go while waiting for it (never waiting for `mu`
// with the GIL held, which could deadlock). (Whether a thread holds the GIL is not asked:
// PyGILState_Check is outside the limited API of the stable-ABI module.)
std::unique_lock<std::mutex> lock_releasing_gil(std::mutex& mu) {
  std::unique_lock<std::mutex> lock(mu, std::try_to_lock);
  if (!lock.owns_lock()) {
    nb::gil_scoped_release release;
    lock.lock();
  }
  return lock;
}

// What a source has served (its IoStats), counted from any number of reading threads.
class ReadCounter {
 public:
  void add(uint64_t bytes) {
    requests_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  jtree::IoStats stats() const {
    jtree::IoStats s;
    s.read_requests = requests_.load(std::memory_order_relaxed);
    s.bytes_read = bytes_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> bytes_{0};
};

class FileObjectSource final : public jtree::Source {
 public:
  FileObjectSource(nb::object f, std::string name, uint64_t base, uint64_t size)
      : f_(std::move(f)), name_(std::move(name)), base_(base), size_(size) {}
  ~FileObjectSource() override { release_with_gil(f_); }

  const std::string& name() const override { return name_; }
  jtree::Result<uint64_t> size() override { return size_; }

  jtree::Status read(std::span<const jtree::ReadRange> ranges) override {
    nb::gil_scoped_acquire gil;  // (whether or not the calling thread held it)
    auto lock = lock_releasing_gil(mu_);
    for (const jtree::ReadRange& r : ranges) {
      const uint64_t len = r.dst.size();
      if (r.offset > size_ || len > size_ - r.offset) {
        return jtree::Status::io_error(name_ + ": unexpected end of file at offset " +
                                      std::to_string(r.offset) + " (wanted " +
                                      std::to_string(len) + " bytes, the object has " +
                                      std::to_string(size_) + ")");
      }
      if (len == 0) continue;
      jtree::Status st = read_one(r.offset, r.dst);
      if (!st.ok()) return st;
      counter_.add(len);
    }
    return jtree::Status::success();
  }

  jtree::IoStats stats() const override { return counter_.stats(); }

 private:
  // seek + readinto until `dst` is full. Called with the GIL and mu_ held.
  jtree::Status read_one(uint64_t offset, std::span<std::byte> dst) {
    try {
      f_.attr("seek")(base_ + offset);
      size_t filled = 0;
      while (filled < dst.size()) {
        nb::object view = nb::steal(PyMemoryView_FromMemory(
            reinterpret_cast<char*>(dst.data() + filled),
            static_cast<Py_ssize_t>(dst.size() - filled), PyBUF_WRITE));
        if (!view.is_valid()) throw nb::python_error();
        nb::object got = f_.attr("readinto")(view);
        // The view points into the reader's buffer: it must not outlive this call.
        view.attr("release")();
        if (got.is_none()) {
          return jtree::Status::io_error(name_ + ": readinto() returned None (a non-blocking "
                                        "object with no data ready)");
        }
        const long long n = nb::cast<long long>(got);
        if (n <= 0 || static_cast<uint64_t>(n) > dst.size() - filled) {
          return jtree::Status::io_error(
              name_ + ": unexpected end of file at offset " + std::to_string(offset + filled) +
              " (the object is shorter than when it was opened)");
        }
        filled += static_cast<size_t>(n);
      }
    } catch (nb::python_error& e) {
      return jtree::Status::io_error(name_ + ": reading at offset " + std::to_string(offset) +
                                    " failed: " + describe(e));
    } catch (const std::exception& e) {  // (nb::cast of a strange readinto result)
      return jtree::Status::io_error(name_ + ": readinto() returned no byte count: " + e.what());
    }
    return jtree::Status::success();
  }

  nb::object f_;
  const std::string name_;
  const uint64_t base_, size_;
  std::mutex mu_;  // the object has one position: one seek + readinto at a time
  ReadCounter counter_;
};

class BufferSource final : public jtree::Source {
 public:
  BufferSource(nb::handle data, std::string name) : name_(std::move(name)) {
    if (PyObject_GetBuffer(data.ptr(), &view_, PyBUF_SIMPLE) != 0) throw nb::python_error();
    held_ = true;
  }
  ~BufferSource() override {
    if (!held_ || !Py_IsInitialized()) return;
    nb::gil_scoped_acquire gil;
    PyBuffer_Release(&view_);
  }

  const std::string& name() const override { return name_; }
  jtree::Result<uint64_t> size() override { return static_cast<uint64_t>(view_.len); }

  // The buffer is held (a bytearray cannot resize while exported): reads need no lock and
  // no GIL.
  jtree::Status read(std::span<const jtree::ReadRange> ranges) override {
    const auto size = static_cast<uint64_t>(view_.len);
    for (const jtree::ReadRange& r : ranges) {
      const uint64_t len = r.dst.size();
      if (r.offset > size || len > size - r.offset) {
        return jtree::Status::io_error(name_ + ": unexpected end of data at offset " +
                                      std::to_string(r.offset) + " (wanted " +
                                      std::to_string(len) + " bytes, there are " +
                                      std::to_string(size) + ")");
      }
      if (len > 0) {
        std::memcpy(r.dst.data(), static_cast<const std::byte*>(view_.buf) + r.offset, len);
      }
      counter_.add(len);
    }
    return jtree::Status::success();
  }

  std::span<const std::byte> mapping() const override {
    return {static_cast<const std::byte*>(view_.buf), static_cast<size_t>(view_.len)};
  }

  jtree::IoStats stats() const override { return counter_.stats(); }

 private:
  Py_buffer view_{};
  bool held_ = false;
  const std::string name_;
  ReadCounter counter_;
};

class FileObjectSink final : public jtree::Sink {
 public:
  FileObjectSink(nb::object f, std::string name) : f_(std::move(f)), name_(std::move(name)) {}
  ~FileObjectSink() override { release_with_gil(f_); }

  const std::string& name() const override { return name_; }
  uint64_t position() const override { return position_; }

  jtree::Status append(std::span<const std::byte> data) override {
    if (data.empty()) return jtree::Status::success();
    nb::gil_scoped_acquire gil;
    try {
      size_t done = 0;
      while (done < data.size()) {
        nb::object view = nb::steal(PyMemoryView_FromMemory(
            const_cast<char*>(reinterpret_cast<const char*>(data.data() + done)),
            static_cast<Py_ssize_t>(data.size() - done), PyBUF_READ));
        if (!view.is_valid()) throw nb::python_error();
        nb::object n = f_.attr("write")(view);
        view.attr("release")();
        // Buffered objects write everything (or raise); raw ones may write less, or None
        // when non-blocking and full.
        const long long wrote = n.is_none() ? 0 : nb::cast<long long>(n);
        if (wrote <= 0) {
          return jtree::Status::io_error(name_ + ": write() wrote nothing (a non-blocking or "
                                        "full object)");
        }
        done += static_cast<size_t>(wrote);
      }
    } catch (nb::python_error& e) {
      return jtree::Status::io_error(name_ + ": write failed: " + describe(e));
    } catch (const std::exception& e) {
      return jtree::Status::io_error(name_ + ": write() returned no byte count: " + e.what());
    }
    position_ += data.size();
    bytes_written_ += data.size();
    write_requests_++;
    return jtree::Status::success();
  }

  jtree::Status sync() override { return flush(); }
  jtree::Status commit() override { return flush(); }
  void abort() noexcept override {}

  jtree::IoStats stats() const override {
    jtree::IoStats s;
    s.write_requests = write_requests_;
    s.bytes_written = bytes_written_;
    return s;
  }

 private:
  jtree::Status flush() {
    nb::gil_scoped_acquire gil;
    try {
      if (nb::hasattr(f_, "flush")) f_.attr("flush")();
    } catch (nb::python_error& e) {
      return jtree::Status::io_error(name_ + ": flush failed: " + describe(e));
    }
    return jtree::Status::success();
  }

  nb::object f_;
  const std::string name_;
  uint64_t position_ = 0;
  uint64_t write_requests_ = 0;
  uint64_t bytes_written_ = 0;
};

}  // namespace

std::shared_ptr<jtree::Source> file_object_source(nb::object f, std::string name, uint64_t base,
                                                  uint64_t size) {
  return std::make_shared<FileObjectSource>(std::move(f), std::move(name), base, size);
}

std::shared_ptr<jtree::Source> buffer_source(nb::handle data, std::string name) {
  return std::make_shared<BufferSource>(data, std::move(name));
}

std::unique_ptr<jtree::Sink> file_object_sink(nb::object f, std::string name) {
  return std::make_unique<FileObjectSink>(std::move(f), std::move(name));
}

}  // namespace jtpy
