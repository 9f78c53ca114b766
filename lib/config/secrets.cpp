// Secrets kept in files (password_file): read, trimmed, and never echoed in errors.
#include "config/secrets.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace outboxd::config {
namespace {

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

std::string quoted(const std::string& path) { return "\"" + path + "\""; }

core::Error cannot_read(const std::string& path, int error_number) {
  return core::fatal_error("cannot read " + quoted(path) + ": " + std::strerror(error_number));
}

}  // namespace

core::Result<std::string> read_secret_file(const std::string& path, const std::string& shown) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) return cannot_read(shown, errno);

  std::string content;
  char buffer[4096];
  while (true) {
    const std::size_t got = std::fread(buffer, 1, sizeof buffer, file.get());
    content.append(buffer, got);
    if (content.size() > kMaxSecretFileBytes) {
      return core::fatal_error(quoted(shown) + " is larger than " + std::to_string(kMaxSecretFileBytes) +
                               " bytes; is it the right file?");
    }
    if (got < sizeof buffer) break;
  }
  // fopen succeeds on a directory; the read is what fails (EISDIR).
  if (std::ferror(file.get()) != 0) return cannot_read(shown, errno);

  if (!content.empty() && content.back() == '\n') {
    content.pop_back();
    if (!content.empty() && content.back() == '\r') content.pop_back();
  }
  if (content.empty()) return core::fatal_error(quoted(shown) + " is empty");
  return content;
}

core::Status check_readable_file(const std::string& path, const std::string& shown) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) return cannot_read(shown, errno);
  char byte = 0;
  if (std::fread(&byte, 1, 1, file.get()) != 1 && std::ferror(file.get()) != 0) return cannot_read(shown, errno);
  return {};
}

}  // namespace outboxd::config
