// Reading each top-level section of the file into its struct, with the checks of single values (internal).
#pragma once

#include "config/config.hpp"
#include "config/yaml_reader.hpp"

namespace outboxd::config {

void read_database(MapReader& root, DatabaseConfig& out);
void read_broker(MapReader& root, BrokerConfig& out);
// broker.cloudevents, called by read_broker.
void read_cloudevents(MapReader& broker, CloudEventsConfig& out);
void read_outbox(MapReader& root, OutboxConfig& out);
void read_dispatch(MapReader& root, DispatchConfig& out);
void read_retention(MapReader& root, RetentionConfig& out);
void read_leases(MapReader& root, LeaseConfig& out);
void read_log(MapReader& root, LogConfig& out);
void read_http(MapReader& root, HttpConfig& out);

// password / password_file of a section: at most one of them; the file is read
// here (so that check-config finds a bad one) and its resolved path kept in `file_out`.
void read_password(MapReader& section, std::string& out, std::string& file_out);

}  // namespace outboxd::config
