// The config corpus: every valid file loads cleanly, every invalid one yields exactly its "# expect:" lines.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/loader.hpp"

namespace {

namespace fs = std::filesystem;
using outboxd::config::load_file;

const fs::path kCorpus = fs::path(OUTBOXD_SOURCE_DIR) / "tests" / "config_corpus";

std::vector<fs::path> yaml_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The text after "# <tag>: " on each comment line that carries the tag.
std::vector<std::string> tagged_lines(const fs::path& file, const std::string& tag) {
  const std::string prefix = "# " + tag + ": ";
  std::vector<std::string> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(prefix.size()));
  }
  return out;
}

// The variables the corpus files refer to.
void set_corpus_environment() {
  ::setenv("OUTBOXD_CORPUS_DB_HOST", "db.corpus.test", 1);
  ::setenv("OUTBOXD_CORPUS_BROKER_USER", "corpus-user", 1);
  ::setenv("OUTBOXD_CORPUS_BROKER_PASSWORD", "corpus-password", 1);
  ::setenv("OUTBOXD_CORPUS_BATCH_SIZE", "250", 1);
  ::setenv("OUTBOXD_CORPUS_EMPTY", "", 1);
  ::setenv("OUTBOXD_CORPUS_NOT_A_NUMBER", "lots", 1);
  ::unsetenv("OUTBOXD_CORPUS_BROKER_HOST");
  ::unsetenv("OUTBOXD_CORPUS_UNSET");
}

}  // namespace

TEST_CASE("every valid corpus file loads without diagnostics", "[config][corpus]") {
  set_corpus_environment();
  const auto files = yaml_files(kCorpus / "valid");
  REQUIRE(files.size() >= 5);
  for (const auto& file : files) {
    INFO(file.filename().string());
    const auto loaded = load_file(file.string());
    INFO(loaded.error_text());
    REQUIRE(loaded.ok());
    for (const auto& expected : tagged_lines(file, "expect-summary")) {
      CHECK(outboxd::config::summary(loaded.value()) == expected);
    }
  }
}

TEST_CASE("every invalid corpus file yields exactly its expected diagnostics, in order", "[config][corpus]") {
  set_corpus_environment();
  const auto files = yaml_files(kCorpus / "invalid");
  REQUIRE(files.size() >= 10);
  for (const auto& file : files) {
    INFO(file.filename().string());
    const auto expected = tagged_lines(file, "expect");
    REQUIRE_FALSE(expected.empty());
    const auto loaded = load_file(file.string());
    REQUIRE_FALSE(loaded.ok());
    std::vector<std::string> actual;
    for (const auto& diagnostic : loaded.diagnostics()) {
      CHECK(diagnostic.file == file.string());
      CHECK(diagnostic.line > 0);  // every mistake in a file that could be read has a line and column
      CHECK(diagnostic.column > 0);
      actual.push_back(diagnostic.to_string_without_file());
    }
    CHECK(actual == expected);
  }
}

TEST_CASE("the corpus has a file with several mistakes, all reported at once", "[config][corpus]") {
  set_corpus_environment();
  const auto loaded = load_file((kCorpus / "invalid" / "many_mistakes.yaml").string());
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.diagnostics().size() >= 4);
}
