// Read access to a PGresult in text format.
#include <libpq-fe.h>

#include "pg/connection.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::pg {
void Rows::Release::operator()(void* result) const { PQclear(static_cast<PGresult*>(result)); }

Rows::Rows() = default;
Rows::Rows(void* result) : result_(result) {}
Rows::~Rows() = default;
Rows::Rows(Rows&&) noexcept = default;
Rows& Rows::operator=(Rows&&) noexcept = default;

int Rows::size() const { return result_ ? PQntuples(static_cast<const PGresult*>(result_.get())) : 0; }
int Rows::columns() const { return result_ ? PQnfields(static_cast<const PGresult*>(result_.get())) : 0; }

bool Rows::is_null(int row, int column) const {
  return PQgetisnull(static_cast<const PGresult*>(result_.get()), row, column) != 0;
}

std::string_view Rows::text(int row, int column) const {
  const PGresult* result = static_cast<const PGresult*>(result_.get());
  return {PQgetvalue(result, row, column), static_cast<std::size_t>(PQgetlength(result, row, column))};
}

std::optional<std::string> Rows::optional_text(int row, int column) const {
  if (is_null(row, column)) return std::nullopt;
  return std::string(text(row, column));
}

std::int64_t Rows::int64(int row, int column) const { return optional_int64(row, column).value_or(0); }

std::optional<std::int64_t> Rows::optional_int64(int row, int column) const {
  if (is_null(row, column)) return std::nullopt;
  return parse_int64(text(row, column));
}

bool Rows::boolean(int row, int column) const { return !is_null(row, column) && text(row, column) == "t"; }

std::int64_t Rows::affected() const {
  if (!result_) return 0;
  return parse_int64(PQcmdTuples(const_cast<PGresult*>(static_cast<const PGresult*>(result_.get())))).value_or(0);
}

}  // namespace outboxd::pg
