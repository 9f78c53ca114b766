// CloudEvents 1.0 rules that need no AMQP: attribute names, the RFC 3339 time, URI-references.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace outboxd::core {

// The longest extension name the CloudEvents spec recommends; longer names
// are legal there but not portable, so the daemon keeps them plain.
inline constexpr std::size_t kMaxExtensionNameLength = 20;

// 1..20 characters of a-z and 0-9, and not one of the context attributes the
// daemon sets itself (id, source, specversion, type, time, subject,
// datacontenttype), nor `data` (reserved by the event formats) nor
// `traceparent` (kept where tracing tools read it).
bool is_extension_name(std::string_view name);

// "2026-12-01T13:09:57.123456Z": UTC, always six fractional digits.
std::string rfc3339_utc(std::chrono::system_clock::time_point time);

// RFC 3986 URI-reference: an absolute URI ("urn:x", "https://h/p") or a
// relative reference ("/orders"); non-empty, only the characters RFC 3986
// allows, every '%' followed by two hex digits, and a scheme where a ':'
// comes before the first '/', '?' or '#'.
bool is_uri_reference(std::string_view text);

}  // namespace outboxd::core
