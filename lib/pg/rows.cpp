// Read access to a PGresult, in text or binary format.
#include <libpq-fe.h>

#include "pg/connection.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::pg {
namespace {

// int2, int4 and int8 in binary format: two's complement, big-endian, told
// apart by their length. Nullopt for any other length.
std::optional<std::int64_t> binary_integer(std::string_view bytes) {
  if (bytes.size() != 2 && bytes.size() != 4 && bytes.size() != 8) return std::nullopt;
  std::uint64_t value = 0;
  for (const char c : bytes) value = (value << 8) | static_cast<unsigned char>(c);
  const unsigned unused = 64 - 8 * static_cast<unsigned>(bytes.size());
  // Shift the sign bit to the top, then back with sign extension.
  return static_cast<std::int64_t>(value << unused) >> unused;
}

}  // namespace

void Rows::Clear::operator()(void* result) const { PQclear(static_cast<PGresult*>(result)); }

Rows::Rows() = default;
Rows::Rows(void* result) : result_(result) {}
Rows::~Rows() = default;
Rows::Rows(Rows&&) noexcept = default;
Rows& Rows::operator=(Rows&&) noexcept = default;

int Rows::size() const { return result_ ? PQntuples(static_cast<const PGresult*>(result_.get())) : 0; }
int Rows::columns() const { return result_ ? PQnfields(static_cast<const PGresult*>(result_.get())) : 0; }

std::string_view Rows::column_name(int column) const {
  const char* name = PQfname(static_cast<const PGresult*>(result_.get()), column);
  return name == nullptr ? std::string_view() : std::string_view(name);
}

bool Rows::binary(int column) const { return PQfformat(static_cast<const PGresult*>(result_.get()), column) == 1; }

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
  if (binary(column)) return binary_integer(text(row, column));
  return parse_int64(text(row, column));
}

bool Rows::boolean(int row, int column) const {
  if (is_null(row, column)) return false;
  const std::string_view value = text(row, column);
  return binary(column) ? value.size() == 1 && value[0] != 0 : value == "t";
}

std::int64_t Rows::affected() const {
  if (!result_) return 0;
  return parse_int64(PQcmdTuples(const_cast<PGresult*>(static_cast<const PGresult*>(result_.get())))).value_or(0);
}

}  // namespace outboxd::pg
