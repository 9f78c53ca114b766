// libFuzzer target: arbitrary bytes as a row's headers JSON, mapped to AMQP application properties.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <proton/message.hpp>

#include "amqp/detail/headers_mapping.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  proton::message::property_map properties;
  (void)outboxd::amqp::add_header_properties(json, properties);
  return 0;
}
