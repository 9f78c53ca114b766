// SHA-256 through libcrypto's EVP_Digest (OpenSSL is already loaded by libpq).
#include "pg/sha256.hpp"

#include <openssl/evp.h>

#include <array>
#include <cstdlib>

namespace outboxd::pg {

std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  // SHA-256 cannot fail short of memory exhaustion; a wrong checksum would
  // silently refuse every migration, so stop instead.
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1) std::abort();
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(size * 2);
  for (unsigned int i = 0; i < size; ++i) {
    hex.push_back(kDigits[digest[i] >> 4]);
    hex.push_back(kDigits[digest[i] & 15]);
  }
  return hex;
}

}  // namespace outboxd::pg
