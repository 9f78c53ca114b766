// What to grant when PostgreSQL refused a statement for a missing privilege (SQLSTATE 42501).
#pragma once

#include <string>

#include "pg/connection.hpp"

namespace outboxd::pg {

// The fix for a statement of the daemon or the CLI that `connection` ran and
// PostgreSQL refused (ErrorKind::forbidden), asked of that connection: the GRANT
// of <schema>_dispatcher to its login role, or, when the role holds it
// already, that the group role's grants are older than this outboxd (run
// `outboxd migrate`). Never fails: without an answer it names the GRANT for
// the login role of database.url.
std::string dispatcher_privilege_fix(Connection& connection, const std::string& schema);

}  // namespace outboxd::pg
