// A client for /healthz: how `outboxd healthcheck` asks a running daemon whether it is alive.
#pragma once

#include <chrono>
#include <string>

#include "core/result.hpp"

namespace outboxd::metrics {

// GETs /healthz from the server that http.listen `listen` names; a wildcard
// host (0.0.0.0, [::]) is asked on the loopback address of its family, since
// a server bound to every address answers there too. Ok on 200. Otherwise a
// transient error naming the URL and either the reply ("503 main loop
// stalled ...") or why there was none ("Connection"); a fatal one when
// `listen` does not parse or has port 0 (chosen at start, so unknown here).
core::Status probe_healthz(const std::string& listen, std::chrono::milliseconds timeout);

}  // namespace outboxd::metrics
