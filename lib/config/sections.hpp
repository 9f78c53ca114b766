// The readers of keys that need more than a range or a word list, for the key table's Custom rows (internal).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace outboxd::config {

// Each reads `key` of its open section into `out` and reports what is wrong
// with it; `config` is for what the key sets besides (a parsed url) or
// depends on (a key read before it).

// sections_connections.cpp
void read_database_url(MapReader& database, std::string_view key, std::string& out, Config& config);
void read_listen_url(MapReader& database, std::string_view key, std::string& out, Config& config);
void read_standby_wait(MapReader& database, std::string_view key, StandbyWait& out, Config& config);
// broker.url and broker.urls, exactly one of them.
void read_broker_urls(MapReader& broker, std::string_view key, std::string& out, Config& config);
void read_broker_username(MapReader& broker, std::string_view key, std::string& out, Config& config);
void read_sasl_mechanisms(MapReader& broker, std::string_view key, std::vector<std::string>& out, Config& config);
void read_tls_file(MapReader& tls, std::string_view key, std::string& out, Config& config);
void read_container_id(MapReader& broker, std::string_view key, std::string& out, Config& config);
// password / password_file of a section: at most one of them; the file is read
// here (so that check-config finds a bad one) and its resolved path kept in `file_out`.
void read_password(MapReader& section, std::string& out, std::string& file_out);

// sections_cloudevents.cpp
void read_cloudevents_source(MapReader& cloudevents, std::string_view key, std::string& out, Config& config);
void read_cloudevents_destinations(MapReader& cloudevents, std::string_view key, std::vector<std::string>& out,
                                   Config& config);
void read_cloudevents_default_type(MapReader& cloudevents, std::string_view key, std::string& out, Config& config);

// sections_runtime.cpp
void read_outbox_schema(MapReader& outbox, std::string_view key, std::string& out, Config& config);
void read_workflow_schema(MapReader& outbox, std::string_view key, std::string& out, Config& config);
void read_instance_id(MapReader& leases, std::string_view key, std::string& out, Config& config);
void read_http_listen(MapReader& http, std::string_view key, std::string& out, Config& config);
void read_console_listen(MapReader& console, std::string_view key, std::string& out, Config& config);
// The path, once the file reads as a token (check-config finds a missing or empty one).
void read_console_token_file(MapReader& console, std::string_view key, std::string& out, Config& config);

// sections_destinations.cpp
void read_destinations(MapReader& root, std::string_view key, std::vector<DestinationEntry>& out, Config& config);

// sections_outboxes.cpp: each outbox's and the catalog's database: and
// outbox: read through the rows of the top-level sections, over their values.
void read_outboxes(MapReader& root, std::string_view key, std::vector<OutboxEntry>& out, Config& config);
// After tenants.catalog.query: only a catalog with a query has a database.
void read_catalog_database(MapReader& catalog, std::string_view key, DatabaseConfig& out, Config& config);
void read_catalog_query(MapReader& catalog, std::string_view key, std::string& out, Config& config);

}  // namespace outboxd::config
