// Telling the operator which grant a refused statement lacked, from the refused session itself.
#include "pg/privileges.hpp"

#include "pg/text_codec.hpp"

namespace outboxd::pg {

std::string dispatcher_privilege_fix(Connection& connection, const std::string& schema) {
  // The schema is a validated lower-case identifier; the login role may be anything.
  const std::string group = schema + "_dispatcher";
  const std::string grant = "GRANT " + group + " TO ";
  // current_user, not the URL's user: the one PostgreSQL checked. No row: the
  // group role does not exist (the schema was never migrated on this cluster).
  auto found = connection.exec_params(
      "SELECT current_user::text, pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER') "
      "FROM pg_catalog.pg_roles r WHERE r.rolname = $1",
      {group});
  if (!found || found.value().size() == 0) {
    return "the login role of database.url needs the group role " + group + ": " + grant +
           "<login role>; (the group role is created by outboxd migrate)";
  }
  const std::string login = quote_ident(found.value().text(0, 0));
  if (!found.value().boolean(0, 1)) return "the login role " + login + " lacks " + group + ": " + grant + login + ";";
  return "the login role " + login + " holds " + group + ", whose grants are older than this outboxd: run "
         "outboxd migrate (as the schema's owner) to bring them up to date";
}

}  // namespace outboxd::pg
