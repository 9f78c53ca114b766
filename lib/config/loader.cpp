// Loading a config: read the file, parse the YAML, walk every section, then apply the cross-field rules.
#include "config/loader.hpp"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "config/checks.hpp"
#include "config/env_substitution.hpp"
#include "config/sections.hpp"
#include "config/yaml_reader.hpp"

namespace outboxd::config {
namespace {

constexpr std::size_t kMaxConfigBytes = 1024 * 1024;

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

core::Result<std::string> read_config_file(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) return core::fatal_error(std::string("cannot read the file: ") + std::strerror(errno));
  std::string content;
  char buffer[8192];
  while (true) {
    const std::size_t got = std::fread(buffer, 1, sizeof buffer, file.get());
    content.append(buffer, got);
    if (content.size() > kMaxConfigBytes) {
      return core::fatal_error("the file is larger than " + std::to_string(kMaxConfigBytes) + " bytes");
    }
    if (got < sizeof buffer) break;
  }
  if (std::ferror(file.get()) != 0) return core::fatal_error(std::string("cannot read the file: ") + std::strerror(errno));
  return content;
}

void read_sections(MapReader& root, Config& config) {
  read_database(root, config.database);
  read_broker(root, config.broker);
  read_outbox(root, config.outbox);
  read_dispatch(root, config.dispatch);
  read_retention(root, config.retention);
  read_leases(root, config.leases);
  read_log(root, config.log);
  read_http(root, config.http);
}

// The one document of the file, or nullopt with the reason reported.
std::optional<YAML::Node> parse_document(std::string_view yaml, Diagnostics& diagnostics) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(yaml));
  } catch (const YAML::Exception& error) {
    const Position at = position_of(error.mark);
    diagnostics.add(at.line > 0 ? at : Position{1, 1}, "", "invalid YAML: " + error.msg);
    return std::nullopt;
  }
  if (documents.empty() || (documents.size() == 1 && documents.front().IsNull())) {
    diagnostics.add(Position{1, 1}, "", "the file is empty");
    return std::nullopt;
  }
  if (documents.size() > 1) {
    diagnostics.add(position_of(documents[1].Mark()), "",
                    "a second YAML document starts here; the file must hold exactly one");
    return std::nullopt;
  }
  const YAML::Node& root = documents.front();
  if (!root.IsMap()) {
    diagnostics.add(position_of(root.Mark()), "",
                    "expected a mapping of sections (database:, broker:, ...) at the top level");
    return std::nullopt;
  }
  return root;
}

}  // namespace

LoadResult load_string(std::string_view yaml, std::string source_name, const LoadOptions& options) {
  Diagnostics diagnostics(source_name);
  const auto root = parse_document(yaml, diagnostics);
  if (!root) return diagnostics.take_sorted();

  Config config;
  config.source = source_name;
  KeyPositions positions;
  const Position root_at = position_of(root->Mark());
  positions.record("", root_at);
  ReadContext context(diagnostics, positions, options.env ? options.env : process_environment(),
                      std::filesystem::path(source_name).parent_path());
  try {
    MapReader reader(context, *root, "", root_at);
    read_sections(reader, config);
  } catch (const YAML::Exception& error) {
    // Not expected once the document parsed; reported rather than thrown across the library boundary.
    diagnostics.add(position_of(error.mark), "", "cannot read the YAML document: " + error.msg);
  }
  context.report_unknown_keys();

  CrossCheck check(positions, diagnostics);
  resolve_sasl(config.broker, check);
  validate(config, check);
  if (!diagnostics.empty()) return diagnostics.take_sorted();
  return config;
}

LoadResult load_file(const std::string& path, const LoadOptions& options) {
  auto content = read_config_file(path);
  if (!content) return std::vector<Diagnostic>{Diagnostic{path, 0, 0, "", content.error().message}};
  return load_string(content.value(), path, options);
}

std::vector<std::string> known_key_paths() {
  Diagnostics diagnostics("");
  KeyPositions positions;
  ReadContext context(diagnostics, positions, process_environment(), {});
  Config config;
  {
    MapReader reader(context, YAML::Node(), "", Position{1, 1});
    read_sections(reader, config);
  }
  return context.known_paths();
}

}  // namespace outboxd::config
