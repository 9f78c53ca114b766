// Collecting diagnostics with their positions while a config is read (internal, no YAML types).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/loader.hpp"

namespace outboxd::config {

struct Position {
  int line = 0;    // 1-based; 0: unknown
  int column = 0;  // 1-based
};

class Diagnostics {
 public:
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}

  void add(Position at, std::string key_path, std::string message);
  bool empty() const { return items_.empty(); }
  // Whether something at this key path, or under it, was reported already;
  // rules spanning several keys stay quiet about values known to be bad.
  bool has_error_at(std::string_view path) const;
  bool has_error_exactly_at(std::string_view path) const;
  // In file order; diagnostics at the same position keep the order they were found in.
  std::vector<Diagnostic> take_sorted();

 private:
  std::string file_;
  std::vector<Diagnostic> items_;
};

// Where each key path was given in the file, so that checks made after the
// walk (cross-field rules, SASL resolution) can point at the right place.
class KeyPositions {
 public:
  void record(const std::string& path, Position at);
  bool given(const std::string& path) const { return positions_.count(path) != 0; }
  // The key's position, else that of its nearest recorded parent, else 1:1.
  Position at(const std::string& path) const;

 private:
  std::map<std::string, Position, std::less<>> positions_;
};

}  // namespace outboxd::config
