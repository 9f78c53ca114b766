// Expected failures as values: a result carries either a value or an Error with a kind.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace outboxd::core {

// How a caller should react to a failure. Kept to a few so that every adapter
// maps its library's many error codes to a decision, not to a taxonomy.
enum class ErrorKind {
  transient,  // try again later (connection lost, serialization failure, timeout)
  rejected,   // the input itself is bad (row cannot be encoded, broker rejected it)
  fatal,      // configuration problem or a bug: retrying cannot help
  // The account lacks a privilege: retrying cannot help, and restarting would
  // repeat whatever ran before the refusal (publishing rows it cannot mark).
  // Callers stop as for a configuration error and say what to grant.
  forbidden,
};

const char* to_string(ErrorKind kind);

struct Error {
  ErrorKind kind = ErrorKind::fatal;
  std::string message;
};

inline Error transient_error(std::string message) { return {ErrorKind::transient, std::move(message)}; }
inline Error rejected_error(std::string message) { return {ErrorKind::rejected, std::move(message)}; }
inline Error fatal_error(std::string message) { return {ErrorKind::fatal, std::move(message)}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}      // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  const Error& error() const { return std::get<1>(state_); }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace outboxd::core
