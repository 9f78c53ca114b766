// SHA-256 (FIPS 180-4) for migration checksums: small, dependency-free, not constant-time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace outboxd::pg {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  std::array<std::uint8_t, 32> finish();

 private:
  void compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

// Lower-case hex digest of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace outboxd::pg
