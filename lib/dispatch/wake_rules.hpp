// When the loop asks writers to NOTIFY, looks once more, claims at once, or polls busily: the wake-up rules.
#pragma once

namespace outboxd::dispatch {

// What the loop knows just before it would sleep.
struct BeforeSleepState {
  bool claim_possible = false;       // a claim could run now (room, leases, database, rows expected)
  bool claim_may_find_rows = false;  // the book expects rows: a pass is under way, or something woke it
  bool notify_armed = false;         // writers NOTIFY (the instance row is marked idle)
  bool notifications = false;        // the database connection can receive them (not a transaction pooler
                                     // without database.listen_url)
  bool busy = false;                 // rows pour in (NotifyPolicy::busy): poll instead of NOTIFY
  bool database_up = false;
  bool stopping = false;
};

enum class BeforeSleep {
  claim,       // more to read right away: do not sleep
  arm_notify,  // caught up: ask writers to NOTIFY, then look once more, because a row committed
               // between the last claim and the arming sent no notification
  sleep,       // nothing to read until a wake-up
};

// Without NOTIFY (a transaction pooler and no listen_url) writers are never
// asked to send one, and the poll finds their rows; while rows pour in the
// busy poll finds them.
BeforeSleep before_sleep(const BeforeSleepState& state);

// How the next claim comes about after one that returned.
struct AfterClaim {
  bool disarm_notify = false;     // the loop claims again without being told: writers need not NOTIFY
  bool follow_scheduled = false;  // the scheduled timer moves to this claim's next due row (or clears)
  bool busy_claim = false;        // claim again after dispatch.busy_poll_ms
};

// `full`: the claim came back full (a backlog: claim again at once). Else the
// next claim comes at the next due row, a NOTIFY, the poll, or, while rows
// pour in, the busy poll.
AfterClaim after_claim(bool full, bool busy, bool notify_armed);

}  // namespace outboxd::dispatch
