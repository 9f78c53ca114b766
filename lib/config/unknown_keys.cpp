// Unknown keys: collected during the walk, reported at its end with the nearest known key as a hint.
#include <algorithm>

#include "config/scalar.hpp"
#include "config/suggest.hpp"
#include "config/yaml_reader.hpp"

namespace outboxd::config {

void ReadContext::note_unknown(std::string parent, std::string key, Position at) {
  unknown_.push_back(Unknown{std::move(parent), std::move(key), at});
}

namespace {

// The last name of a key path: "verify_host" of "broker.tls.verify_host".
std::string_view leaf_of(std::string_view path) {
  const auto dot = path.rfind('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

// The one candidate that `pick` accepts; none when no candidate or several do.
template <class Pick>
std::optional<std::string> only(const std::vector<std::string>& candidates, Pick pick) {
  std::optional<std::string> found;
  for (const auto& candidate : candidates) {
    if (!pick(candidate) || candidate == found) continue;
    if (found) return std::nullopt;
    found = candidate;
  }
  return found;
}

}  // namespace

// The names of the known keys in the same mapping as `unknown`.
std::vector<std::string> ReadContext::siblings_of(const Unknown& unknown) const {
  const std::string prefix = unknown.parent.empty() ? "" : unknown.parent + ".";
  std::vector<std::string> siblings;
  for (const auto& path : known_) {
    if (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
        path.find('.', prefix.size()) == std::string::npos) {
      siblings.push_back(path.substr(prefix.size()));
    }
  }
  return siblings;
}

// The likeliest mistakes first: a duration without its unit, a typo, a key cut short
// ("verify" for "verify_host"), then the right key in the wrong section.
std::optional<std::string> ReadContext::suggestion_for(const Unknown& unknown) const {
  const std::vector<std::string> siblings = siblings_of(unknown);
  for (const char* suffix : {"_ms", "_s"}) {
    const std::string with_unit = unknown.key + suffix;
    if (std::find(siblings.begin(), siblings.end(), with_unit) != siblings.end()) return with_unit;
  }
  if (auto close = closest_match(unknown.key, siblings)) return close;
  if (auto longer = only(siblings, [&](const std::string& key) { return key.rfind(unknown.key + "_", 0) == 0; })) {
    return longer;
  }
  return only(known_, [&](const std::string& path) { return leaf_of(path) == unknown.key; });
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
