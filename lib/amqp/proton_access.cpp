// Reads a tracker's remote disposition and sends encoded bytes through Proton's C API.
#include "amqp/detail/proton_access.hpp"

#include <proton/condition.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>

#include "core/safe_text.hpp"

namespace outboxd::amqp {
namespace {

// proton::tracker keeps its pn_delivery_t behind a protected accessor. A
// member pointer formed in a derived class is the standard-conforming way to
// call it on any tracker, without casting the tracker to a type it is not.
struct TrackerAccess : proton::tracker {
  static pn_delivery_t* delivery(const proton::tracker& tracker) {
    constexpr auto accessor = &TrackerAccess::pn_object;
    return (tracker.*accessor)();
  }
};

// The same for a sender's pn_link_t.
struct SenderAccess : proton::sender {
  static pn_link_t* link(const proton::sender& sender) {
    constexpr auto accessor = &SenderAccess::pn_object;
    return (sender.*accessor)();
  }
};

pn_disposition_t* remote_disposition(const proton::tracker& tracker) {
  pn_delivery_t* delivery = TrackerAccess::delivery(tracker);
  return delivery ? pn_delivery_remote(delivery) : nullptr;
}

}  // namespace

std::string remote_condition(const proton::tracker& tracker) {
  pn_disposition_t* disposition = remote_disposition(tracker);
  if (!disposition) return {};
  pn_condition_t* condition = pn_disposition_condition(disposition);
  if (!condition || !pn_condition_is_set(condition)) return {};
  const char* name = pn_condition_get_name(condition);
  const char* description = pn_condition_get_description(condition);
  std::string text = name ? name : "";
  if (description && *description) {
    if (!text.empty()) text += ": ";
    text += description;
  }
  return core::safe_text(text);
}

ModifiedFlags remote_modified_flags(const proton::tracker& tracker) {
  pn_disposition_t* disposition = remote_disposition(tracker);
  if (!disposition) return {};
  return {pn_disposition_is_failed(disposition), pn_disposition_is_undeliverable(disposition)};
}

proton::binary make_tag(std::uint64_t value) {
  proton::binary tag(8, 0);
  for (int i = 7; i >= 0; --i) {
    tag[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(value & 0xff);
    value >>= 8;
  }
  return tag;
}

std::optional<std::uint64_t> tag_value(const proton::binary& tag) {
  if (tag.size() != 8) return std::nullopt;
  std::uint64_t value = 0;
  for (auto byte : tag) value = (value << 8) | byte;
  return value;
}

void send_encoded(proton::sender& sender, const std::vector<char>& message, const proton::binary& tag) {
  pn_link_t* link = SenderAccess::link(sender);
  pn_delivery(link, pn_dtag(reinterpret_cast<const char*>(tag.data()), tag.size()));
  pn_link_send(link, message.data(), message.size());
  pn_link_advance(link);
  // At zero credit return_credit() only clears the C++ binding's drain flag,
  // which is what send() does there.
  if (pn_link_credit(link) == 0) sender.return_credit();
}

}  // namespace outboxd::amqp
