// The claim against the DBA's destination rules: a stored row a rule set since refuses comes back unsendable, naming it.
#include <map>
#include <string>
#include <vector>
#include <catch2/catch.hpp>

#include "outbox_rows.hpp"
#include "pg/outbox_store.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

namespace {

TestRow to(const std::string& destination, const std::string& message_id) {
  TestRow row;
  row.message_id = message_id;
  row.destination = destination;
  return row;
}

using Outcomes = std::vector<std::string>;

// "message_id: why unsendable" ("message_id: sendable"), by message_id, from
// every statement of one claim: immediate rows by id, scheduled ones, by destination.
Outcomes outcomes(OutboxStore& store) {
  auto sets = store.claim(all_partitions(), 10, 0, {}, {}, core::LaneRequest{10, 10, "", {}});
  if (!sets) FAIL("claim: " << sets.error().message);
  std::map<std::string, std::string> by_id;
  for (const core::ClaimedSet* set : {&sets.value().immediate, &sets.value().scheduled, &sets.value().lanes}) {
    for (const auto& row : set->rows) by_id[row.message_id] = row.unsendable.value_or("sendable");
  }
  Outcomes out;
  for (const auto& [id, why] : by_id) out.push_back(id + ": " + why);
  return out;
}

const std::string kCharset = " has characters outside Latin-1 (settings.destination_charset is latin1); not sent";
const std::string kRussian = "destination \"заказы\"" + kCharset;
const std::string kAddress = "destination \"/queue/заказы\"" + kCharset;

}  // namespace

TEST_CASE("a stored row beyond Latin-1 is claimed unsendable, naming the charset rule, while it is latin1",
          "[pg][store][destinations]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  must(setup, "UPDATE outbox.settings SET allowed_address_prefixes = '{/queue/}'");
  // Written while any name was allowed, in every statement's reach: due now,
  // a scheduled row due since, a full address.
  const core::RowId russian = insert(setup, to("заказы", "ru"));
  insert(setup, to("café", "fr"));
  TestRow later = to("/queue/заказы", "ru-scheduled");
  later.created_at = "now() - interval '1 hour'";
  later.due_at = "now() - interval '1 minute'";
  insert(setup, later);
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  lease_all(setup);

  CHECK(outcomes(store) == Outcomes{"fr: sendable", "ru: sendable", "ru-scheduled: sendable"});

  must(setup, "UPDATE outbox.settings SET destination_charset = 'latin1'");
  CHECK(outcomes(store) == Outcomes{"fr: sendable", "ru: " + kRussian, "ru-scheduled: " + kAddress});

  SECTION("each rule names itself, the charset first where both refuse, as destination_problem() checks them") {
    must(setup, "UPDATE outbox.settings SET allowed_destinations = '{billing.*}'");
    CHECK(outcomes(store) == Outcomes{"fr: destination \"café\" is not in settings.allowed_destinations; not sent",
                                      "ru: " + kRussian, "ru-scheduled: " + kAddress});
  }
  SECTION("parked with that reason, as the planner parks an unsendable row: never sent") {
    REQUIRE(store.record_failures({{russian, 1, std::chrono::milliseconds(0), kRussian, true}}, kLeaseOwner).ok());
    const Rows row = must(setup, "SELECT status, last_error, dispatched_at IS NULL FROM outbox.messages WHERE id = $1",
                          {std::to_string(russian)});
    CHECK(row.text(0, 0) == "parked");
    CHECK(row.text(0, 1) == kRussian);
    CHECK(row.boolean(0, 2));
    CHECK(outcomes(store) == Outcomes{"fr: sendable", "ru-scheduled: " + kAddress});
  }
}
