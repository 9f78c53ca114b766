// SHA-256 hex digests for migration checksums, computed by OpenSSL's libcrypto.
#pragma once

#include <string>
#include <string_view>

namespace outboxd::pg {

// Lower-case hex digest of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace outboxd::pg
