// The key table against what is made or written from it: the loader, config/outboxd.yaml, docs/configuration.md.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "config/key_table.hpp"
#include "config/loader.hpp"

using namespace outboxd::config;

namespace {

using Strings = std::vector<std::string>;

const std::string kExample = std::string(OUTBOXD_SOURCE_DIR) + "/config/outboxd.yaml";
const std::string kDocs = std::string(OUTBOXD_SOURCE_DIR) + "/docs/configuration.md";
const std::string kTableStart = "<!-- key table: made from lib/config/key_table.cpp -->\n";
const std::string kTableEnd = "<!-- end of key table -->\n";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Strings table_paths() {
  Strings paths;
  for (const auto& key : key_table()) paths.push_back(key.path);
  return paths;
}

std::string section_of(const std::string& path) { return path.substr(0, path.rfind('.')); }

// The key paths config/outboxd.yaml shows, written or commented out
// ("  # password: ..."), by indentation; prose in comments may add a few
// paths that are no key, so only the table's own are kept.
Strings example_paths(const std::string& text) {
  static const std::regex line(R"(^( *)(# )?([a-z_]+):( .*)?$)");
  std::vector<std::pair<std::size_t, std::string>> open;  // indentation, section path
  Strings paths;
  std::istringstream in(text);
  for (std::string row; std::getline(in, row);) {
    std::smatch match;
    if (!std::regex_match(row, match, line)) continue;
    const std::size_t indent = match[1].length();
    while (!open.empty() && open.back().first >= indent) open.pop_back();
    const std::string path = (open.empty() ? "" : open.back().second + ".") + match[3].str();
    if (!match[2].matched && !match[4].matched) open.emplace_back(indent, path);
    paths.push_back(path);
  }
  return paths;
}

}  // namespace

TEST_CASE("each section's rows stay together, so the walk opens each section once", "[config][keys]") {
  // As the walk does: a section stays open while rows inside it (or inside
  // a section of it) come, and is closed by the first row outside it.
  Strings open;
  Strings closed;
  for (const auto& path : table_paths()) {
    const std::string section = section_of(path);
    while (!open.empty() && section != open.back() && !section.starts_with(open.back() + ".")) {
      closed.push_back(open.back());
      open.pop_back();
    }
    for (auto dot = section.find('.'); open.empty() || open.back() != section; dot = section.find('.', dot + 1)) {
      const std::string opened = section.substr(0, dot);
      if (!open.empty() && open.back().size() >= opened.size()) continue;
      INFO(path);
      CHECK(std::find(closed.begin(), closed.end(), opened) == closed.end());
      open.push_back(opened);
    }
  }
}

TEST_CASE("the loader reads exactly the table's keys, in its order", "[config][keys]") {
  // On an empty document every reader asks for its key, except broker.urls,
  // which broker.url's reader asks for only when it is given.
  Strings expected = table_paths();
  std::erase(expected, "broker.urls");
  Strings read = known_key_paths();
  std::erase_if(read, [&](const std::string& path) {  // the sections, known on the way
    return std::any_of(expected.begin(), expected.end(),
                       [&](const std::string& key) { return key.starts_with(path + "."); });
  });
  CHECK(read == expected);
}

TEST_CASE("config/outboxd.yaml shows every key of the table, in its section and order", "[config][keys][example]") {
  const Strings table = table_paths();
  Strings shown = example_paths(read_text(kExample));
  std::erase_if(shown, [&](const std::string& path) {
    return std::find(table.begin(), table.end(), path) == table.end();
  });
  CHECK(shown == table);
}

TEST_CASE("docs/configuration.md holds the key table made from the rows", "[config][keys]") {
  const std::string docs = read_text(kDocs);
  const auto start = docs.find(kTableStart);
  const auto end = docs.find(kTableEnd);
  REQUIRE(start != std::string::npos);
  REQUIRE(end != std::string::npos);
  const std::string written = docs.substr(start + kTableStart.size(), end - start - kTableStart.size());
  const std::string made = key_table_markdown();
  if (written != made && std::getenv("OUTBOXD_WRITE_DOCS") != nullptr) {
    std::ofstream(kDocs) << docs.substr(0, start + kTableStart.size()) << made << docs.substr(end);
    return;
  }
  INFO("regenerate: OUTBOXD_WRITE_DOCS=1 build/tests/unit_tests '[keys]'");
  CHECK(written == made);
}
