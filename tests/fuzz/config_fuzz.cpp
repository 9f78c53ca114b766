// libFuzzer target: arbitrary bytes as the text of a config file, through load_string and the summary.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // A fixed environment: ${VAR} substitution is exercised without depending on the machine's.
  outboxd::config::LoadOptions options;
  options.env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "OUTBOXD_FUZZ") return std::string("fuzz");
    return std::nullopt;
  };
  const auto result = outboxd::config::load_string(text, "fuzz/outboxd.yaml", options);
  if (result.ok()) {
    (void)outboxd::config::summary(result.value());
  } else {
    (void)result.error_text();
  }
  return 0;
}
