// Loading a config: read the file, parse the YAML, walk the key table, then apply the cross-field rules.
#include "config/loader.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <vector>

#include "config/checks.hpp"
#include "config/env_substitution.hpp"
#include "config/key_table.hpp"
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

// Where each document of a YAML stream starts and where its root node is,
// from the parser's events. yaml-cpp 0.7's LoadAll never returns on a
// document that starts with a ',': the parser reports an empty document
// without consuming the token, again and again, each one kept in memory.
class DocumentMarks : public YAML::EventHandler {
 public:
  std::size_t count() const { return starts_.size(); }
  const YAML::Mark& start(std::size_t index) const { return starts_[index]; }
  // Where the document's root node is; where the document starts if it has none.
  const YAML::Mark& root(std::size_t index) const { return index < roots_.size() ? roots_[index] : starts_[index]; }

  void OnDocumentStart(const YAML::Mark& mark) override { starts_.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node_at(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node_at(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
    node_at(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node_at(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node_at(mark);
  }
  void OnMapEnd() override {}

 private:
  void node_at(const YAML::Mark& mark) {
    if (roots_.size() < starts_.size()) roots_.push_back(mark);
  }

  std::vector<YAML::Mark> starts_;
  std::vector<YAML::Mark> roots_;
};

// The marks of the first two documents at most: enough to tell one from many,
// and a second one that starts where the first did is a token the parser
// cannot consume.
DocumentMarks first_documents(std::string_view yaml) {
  std::istringstream input{std::string(yaml)};
  YAML::Parser parser(input);
  DocumentMarks marks;
  while (marks.count() < 2 && parser.HandleNextDocument(marks)) {
  }
  return marks;
}

// The one document of the file, or nullopt with the reason reported.
std::optional<YAML::Node> parse_document(std::string_view yaml, Diagnostics& diagnostics) {
  YAML::Node root;
  try {
    const DocumentMarks marks = first_documents(yaml);
    if (marks.count() == 2 && marks.start(1).pos == marks.start(0).pos) {
      const auto at = static_cast<std::size_t>(marks.start(0).pos);
      diagnostics.add(position_of(marks.start(0), Position{1, 1}), "",
                      "invalid YAML: unexpected '" + std::string(1, at < yaml.size() ? yaml[at] : ' ') + "'");
      return std::nullopt;
    }
    if (marks.count() == 2) {
      diagnostics.add(position_of(marks.root(1), Position{1, 1}), "",
                      "a second YAML document starts here; the file must hold exactly one");
      return std::nullopt;
    }
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& error) {
    diagnostics.add(position_of(error.mark, Position{1, 1}), "", "invalid YAML: " + error.msg);
    return std::nullopt;
  }
  if (root.IsNull()) {
    diagnostics.add(Position{1, 1}, "", "the file is empty");
    return std::nullopt;
  }
  if (!root.IsMap()) {
    diagnostics.add(position_of(root.Mark(), Position{1, 1}), "",
                    "expected a mapping of sections (database:, broker:, ...) at the top level");
    return std::nullopt;
  }
  return root;
}

// Whether the file takes the many-outbox form: known before the walk, which
// reads database: first (see ReadContext::many_outboxes). Const nodes: a
// lookup on a mutable one would add the key to the document; and a key a
// map lacks gives a node that throws unless asked IsDefined() first.
bool many_outboxes_form(const YAML::Node& root) {
  const auto given = [](const YAML::Node& node) { return node.IsDefined() && !node.IsNull(); };
  const auto map = [](const YAML::Node& node) { return node.IsDefined() && node.IsMap(); };
  if (given(root["outboxes"])) return true;
  const YAML::Node tenants = root["tenants"];
  if (!map(tenants)) return false;
  const YAML::Node catalog = tenants["catalog"];
  return map(catalog) && given(catalog["query"]);
}

}  // namespace

LoadResult load_string(std::string_view yaml, std::string source_name, const LoadOptions& options) {
  Diagnostics diagnostics(source_name);
  const auto root = parse_document(yaml, diagnostics);
  if (!root) return diagnostics.take_sorted();

  Config config;
  config.source = source_name;
  KeyPositions positions;
  const Position root_at = position_of(root->Mark(), Position{1, 1});
  positions.record("", root_at);
  ReadContext context(diagnostics, positions, options.env ? options.env : process_environment(),
                      std::filesystem::path(source_name).parent_path());
  try {
    context.many_outboxes = many_outboxes_form(*root);
    MapReader reader(context, *root, "", root_at);
    read_keys(reader, config);
  } catch (const YAML::Exception& error) {
    // Not expected once the document parsed; reported rather than thrown across the library boundary.
    diagnostics.add(position_of(error.mark, root_at), "", "cannot read the YAML document: " + error.msg);
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
    read_keys(reader, config);
  }
  return context.known_paths();
}

}  // namespace outboxd::config
