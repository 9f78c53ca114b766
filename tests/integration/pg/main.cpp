// Catch2 entry point for the PostgreSQL integration tests; skips cleanly without a database.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <iostream>

namespace {

constexpr int kSkipped = 4;  // SKIP_RETURN_CODE in CMakeLists.txt

bool listing(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--list", 6) == 0 || std::strcmp(argv[i], "-l") == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const char* url = std::getenv("OUTBOXD_TEST_PG_URL");
  if ((url == nullptr || *url == '\0') && !listing(argc, argv)) {
    const char* required = std::getenv("OUTBOXD_REQUIRE_SERVICES");
    std::cerr << "OUTBOXD_TEST_PG_URL is not set (source .scratch/services.env after scripts/services.sh start)\n";
    return required != nullptr && std::strcmp(required, "1") == 0 ? 1 : kSkipped;
  }
  return Catch::Session().run(argc, argv);
}
