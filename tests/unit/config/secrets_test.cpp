// password / password_file: reading secret files, trimming, and refusing ambiguity.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "config/loader.hpp"
#include "config/secrets.hpp"

using namespace outboxd::config;
namespace fs = std::filesystem;

namespace {

// A scratch directory removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() : path_(fs::temp_directory_path() / ("outboxd-config-test-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string write(const std::string& name, const std::string& content) const {
    const fs::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << content;
    return file.string();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

const char* kDatabase = "database:\n  url: postgresql://outboxd@127.0.0.1:5432/app\n";

}  // namespace

TEST_CASE("a secret file loses exactly one trailing newline", "[config][secrets]") {
  ScratchDir dir;
  CHECK(read_secret_file(dir.write("a", "s3cret\n"), "a").value() == "s3cret");
  CHECK(read_secret_file(dir.write("b", "s3cret"), "b").value() == "s3cret");
  CHECK(read_secret_file(dir.write("c", "s3cret\r\n"), "c").value() == "s3cret");
  CHECK(read_secret_file(dir.write("d", "s3cret\n\n"), "d").value() == "s3cret\n");
  CHECK(read_secret_file(dir.write("e", " spaced \n"), "e").value() == " spaced ");
}

TEST_CASE("an unreadable, empty or oversized secret file is an error that does not show the content",
          "[config][secrets]") {
  ScratchDir dir;
  const auto missing = read_secret_file((dir.path() / "missing").string(), "missing");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "cannot read \"missing\": No such file or directory");

  const auto empty = read_secret_file(dir.write("empty", "\n"), "empty");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().message == "\"empty\" is empty");

  const auto directory = read_secret_file(dir.path().string(), "dir");
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.error().message == "cannot read \"dir\": Is a directory");

  const auto huge = read_secret_file(dir.write("huge", std::string(kMaxSecretFileBytes + 1, 'x')), "huge");
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().message.find("xxx") == std::string::npos);
}

TEST_CASE("password_file is resolved against the config file's directory", "[config][secrets]") {
  ScratchDir dir;
  dir.write("db_password", "from-file\n");
  const std::string config = std::string(kDatabase) +
                             "  password_file: db_password\n"
                             "broker:\n"
                             "  url: amqp://127.0.0.1:5672\n";
  auto loaded = load_string(config, (dir.path() / "outboxd.yaml").string());
  INFO(loaded.error_text());
  REQUIRE(loaded.ok());
  CHECK(loaded.value().database.password == "from-file");
}

TEST_CASE("password and password_file together are an error", "[config][secrets]") {
  ScratchDir dir;
  const std::string file = dir.write("broker_password", "x\n");
  const std::string config = std::string(kDatabase) +
                             "broker:\n"
                             "  url: amqp://127.0.0.1:5672\n"
                             "  username: guest\n"
                             "  password: guest\n"
                             "  password_file: " + file + "\n";
  const auto loaded = load_string(config, "both.yaml");
  REQUIRE(loaded.diagnostics().size() == 1);
  CHECK(loaded.diagnostics()[0].to_string() ==
        "both.yaml:7:18: broker.password_file: give either password or password_file, not both");
}

TEST_CASE("an explicitly empty password is an error rather than no password", "[config][secrets]") {
  const std::string config = std::string(kDatabase) + "  password: \"\"\nbroker:\n  url: amqp://127.0.0.1:5672\n";
  const auto loaded = load_string(config, "empty.yaml");
  REQUIRE(loaded.diagnostics().size() == 1);
  CHECK(loaded.diagnostics()[0].to_string_without_file() ==
        "3:13: database.password: must not be empty (leave the key out instead)");
}
