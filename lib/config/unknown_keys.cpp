// Unknown keys: collected during the walk, reported at its end with the nearest known key as a hint.
#include <algorithm>

#include "config/scalar.hpp"
#include "config/suggest.hpp"
#include "config/yaml_reader.hpp"

namespace outboxd::config {

void ReadContext::note_unknown(std::string parent, std::string key, Position at) {
  unknown_.push_back(Unknown{std::move(parent), std::move(key), at});
}

std::optional<std::string> ReadContext::suggestion_for(const Unknown& unknown) const {
  const std::string prefix = unknown.parent.empty() ? "" : unknown.parent + ".";
  std::vector<std::string> siblings;
  for (const auto& path : known_) {
    if (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
        path.find('.', prefix.size()) == std::string::npos) {
      siblings.push_back(path.substr(prefix.size()));
    }
  }
  // A duration given without its unit suffix is the likeliest mistake of all.
  for (const char* suffix : {"_ms", "_s"}) {
    const std::string with_unit = unknown.key + suffix;
    if (std::find(siblings.begin(), siblings.end(), with_unit) != siblings.end()) return with_unit;
  }
  if (auto close = closest_match(unknown.key, siblings)) return close;
  // A key cut short ("verify" for "verify_host"), if only one key starts so.
  std::optional<std::string> longer;
  for (const auto& sibling : siblings) {
    if (sibling.rfind(unknown.key + "_", 0) != 0 || sibling == longer) continue;
    if (longer) {
      longer.reset();
      break;
    }
    longer = sibling;
  }
  if (longer) return longer;
  // The right key in the wrong section, if only one section has it.
  std::optional<std::string> elsewhere;
  for (const auto& path : known_) {
    const auto dot = path.rfind('.');
    const std::string_view leaf = dot == std::string::npos ? std::string_view(path) : std::string_view(path).substr(dot + 1);
    if (leaf != unknown.key || path == elsewhere) continue;
    if (elsewhere) return std::nullopt;
    elsewhere = path;
  }
  return elsewhere;
}

std::vector<std::string> ReadContext::known_paths() const {
  std::vector<std::string> out;
  for (const auto& path : known_) {
    if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
  }
  return out;
}

void ReadContext::report_unknown_keys() {
  for (const auto& unknown : unknown_) {
    std::string message = "unknown key " + quote_value(unknown.key);
    if (const auto suggestion = suggestion_for(unknown)) message += " (did you mean " + quote_value(*suggestion) + "?)";
    const std::string path = unknown.parent.empty() ? unknown.key : unknown.parent + "." + unknown.key;
    diagnostics.add(unknown.at, path, std::move(message));
  }
  unknown_.clear();
}

}  // namespace outboxd::config
