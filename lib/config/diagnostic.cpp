// Formatting of diagnostics and the accessors of LoadResult.
#include <algorithm>

#include "config/diagnostics.hpp"

namespace outboxd::config {

std::string Diagnostic::to_string() const {
  const std::string rest = to_string_without_file();
  if (file.empty()) return rest;
  return file + (line > 0 ? ":" : ": ") + rest;
}

std::string Diagnostic::to_string_without_file() const {
  std::string out;
  if (line > 0) out += std::to_string(line) + ":" + std::to_string(column) + ": ";
  if (!key_path.empty()) out += key_path + ": ";
  out += message;
  return out;
}

const std::vector<Diagnostic>& LoadResult::diagnostics() const {
  static const std::vector<Diagnostic> kNone;
  if (ok()) return kNone;
  return std::get<1>(state_);
}

std::string LoadResult::error_text() const {
  std::string out;
  for (const auto& diagnostic : diagnostics()) {
    if (!out.empty()) out += '\n';
    out += diagnostic.to_string();
  }
  return out;
}

core::Error LoadResult::error() const { return core::fatal_error(error_text()); }

void Diagnostics::add(Position at, std::string key_path, std::string message) {
  items_.push_back(Diagnostic{file_, at.line, at.column, std::move(key_path), std::move(message)});
}

bool Diagnostics::has_error_at(std::string_view path) const {
  return std::any_of(items_.begin(), items_.end(), [path](const Diagnostic& item) {
    const std::string_view key = item.key_path;
    if (key.substr(0, path.size()) != path) return false;
    return key.size() == path.size() || key[path.size()] == '.' || key[path.size()] == '[';
  });
}

bool Diagnostics::has_error_exactly_at(std::string_view path) const {
  return std::any_of(items_.begin(), items_.end(), [path](const Diagnostic& item) { return item.key_path == path; });
}

std::vector<Diagnostic> Diagnostics::take_sorted() {
  std::stable_sort(items_.begin(), items_.end(), [](const Diagnostic& a, const Diagnostic& b) {
    if (a.line != b.line) return a.line < b.line;
    return a.column < b.column;
  });
  return std::move(items_);
}

void KeyPositions::record(const std::string& path, Position at) { positions_.insert_or_assign(path, at); }

Position KeyPositions::at(const std::string& path) const {
  std::string probe = path;
  while (true) {
    const auto found = positions_.find(probe);
    if (found != positions_.end()) return found->second;
    const auto dot = probe.rfind('.');
    if (dot == std::string::npos) break;
    probe.resize(dot);
  }
  const auto root = positions_.find("");
  if (root != positions_.end()) return root->second;
  return Position{1, 1};
}

}  // namespace outboxd::config
