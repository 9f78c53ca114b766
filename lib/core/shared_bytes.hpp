// An immutable byte string whose copies share one buffer: a row's body, held by the planner and sent without a copy.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace outboxd::core {

// Copying shares the bytes (a reference count, safe across threads: the
// bytes never change); clear() drops this holder's share alone, so the
// buffer is freed when its last holder lets go.
class SharedBytes {
 public:
  SharedBytes() = default;
  // Implicit by design: a row's body is assigned its bytes.
  SharedBytes(std::string bytes) : bytes_(std::make_shared<const std::string>(std::move(bytes))) {}  // NOLINT
  SharedBytes(const char* text) : SharedBytes(std::string(text)) {}                                 // NOLINT

  std::string_view view() const { return bytes_ ? std::string_view(*bytes_) : std::string_view(); }
  std::size_t size() const { return bytes_ ? bytes_->size() : 0; }
  bool empty() const { return size() == 0; }
  std::string_view::const_iterator begin() const { return view().begin(); }
  std::string_view::const_iterator end() const { return view().end(); }
  void clear() { bytes_.reset(); }

  friend bool operator==(const SharedBytes& bytes, std::string_view other) { return bytes.view() == other; }

 private:
  std::shared_ptr<const std::string> bytes_;
};

}  // namespace outboxd::core
