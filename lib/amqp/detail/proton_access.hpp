// Small bridges to what Proton's C++ API does not expose: remote delivery state details, delivery tags, sending bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <proton/binary.hpp>
#include <proton/sender.hpp>
#include <proton/tracker.hpp>

namespace outboxd::amqp {

// The error condition the peer attached to its disposition of `tracker`
// ("amqp:precondition-failed: queue full"), or "" when it sent none. The
// peer's text is untrusted: it comes back through core::safe_text.
std::string remote_condition(const proton::tracker& tracker);

// The delivery-failed / undeliverable-here flags of a remote `modified` outcome.
struct ModifiedFlags {
  bool delivery_failed = false;
  bool undeliverable_here = false;
};
ModifiedFlags remote_modified_flags(const proton::tracker& tracker);

// Delivery tags: 8 bytes, big-endian, from a counter that never repeats.
proton::binary make_tag(std::uint64_t value);
std::optional<std::uint64_t> tag_value(const proton::binary& tag);

// What proton::sender::send(message, tag) does once it has encoded the
// message, for bytes encoded already (see MessageEncoder): a delivery tagged
// `tag`, the bytes, advance; and, as send() does, a drain the peer asked for
// ends once the credit is used up. Our links never pre-settle, so the
// settling send() does for links in settled mode is left out.
void send_encoded(proton::sender& sender, const std::vector<char>& message, const proton::binary& tag);

}  // namespace outboxd::amqp
