// Why a claimed row waits for an earlier row of its session: the claims' four reasons, side by side (internal to lib/pg).
#pragma once

#include <string>

namespace outboxd::pg::outbox_sql {

// Rows `a` and `b` (aliases) are of one session: the session id as one writer
// wrote it (core::session_key in C++), a row without writer (written before 009)
// being one writer. Every statement that compares sessions says it this way.
std::string same_session(const std::string& a, const std::string& b);

// The four reasons, each a predicate over claimed row `m` and `t`, the quoted
// "schema".messages; session_order_sql.cpp holds them together with their whys.
// Behind a due timeout still pending (the immediate claim flags such rows, the others leave them out).
std::string behind_timeout(const std::string& t);
// Not behind a parked or backing-off row; `cursor`, past the start of a pass,
// also counts backing-off rows below it whose time has come.
std::string not_blocked(const std::string& t, const char* cursor);
// The sessions of the immediate claim's rows `c` with a late commit at or below the cursor $3.
std::string late_sessions(const std::string& t);
// `m` is of one of late_sessions()'s sessions (a CTE named `late`).
std::string in_late_session();
// No unclaimed earlier row of the session waits in another destination (the claim by destination).
std::string session_in_order(const std::string& t);

}  // namespace outboxd::pg::outbox_sql
