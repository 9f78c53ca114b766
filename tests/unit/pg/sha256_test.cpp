// SHA-256 against the FIPS 180-4 / NIST example vectors, and the embedded scripts' checksums.
#include <catch2/catch.hpp>

#include <regex>

#include "pg/embedded_migrations.hpp"
#include "pg/migrator.hpp"
#include "pg/sha256.hpp"

using namespace outboxd::pg;

TEST_CASE("sha256 matches the NIST test vectors", "[pg]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                   "mnopqrstnopqrstu") ==
        "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256 is right around the 64-byte block and padding boundaries", "[pg]") {
  // 55 bytes still fit the length in the last block; 56 and 64 need another.
  CHECK(sha256_hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(sha256_hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(sha256_hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST_CASE("embedded migrations are sorted, well named, and carry the file checksum", "[pg]") {
  const auto& list = migrations();
  const std::regex name(R"(^[0-9]+_[A-Za-z0-9_]+\.sql$)");
  int previous = 0;
  for (const Migration& m : list) {
    INFO(m.name);
    CHECK(m.version > previous);
    previous = m.version;
    CHECK(std::regex_match(m.name, name));
    CHECK(std::stoi(m.name) == m.version);
    CHECK(m.checksum.size() == 64);
    CHECK_FALSE(m.sql.empty());
  }
  // The compiler must not have changed a byte: CMake's own file(SHA256)
  // of each file equals ours of the embedded text.
  for (const EmbeddedScript& script : embedded_scripts()) {
    INFO(script.name);
    CHECK(sha256_hex(script.sql) == script.build_sha256);
  }
  CHECK(list.size() == embedded_scripts().size());
}
