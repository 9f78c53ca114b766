// The table of every config key and what is made from it: the loader's walk, the docs' key table (internal).
#pragma once

#include <string>
#include <vector>

#include "config/key_spec.hpp"

namespace outboxd::config {

// Every key, in the order of config/outboxd.yaml; the rows of one section together.
const std::vector<KeySpec>& key_table();

// Reads every key of the table from the document's root, opening each
// section once, as the rows ask for them.
void read_keys(MapReader& root, Config& config);

// Reads the rows of section `name` (database, outbox) from `section`, that
// section opened wherever it sits (an item of outboxes:, tenants.catalog),
// into `config`, whose values are the defaults the section's keys go over.
void read_section_keys(MapReader& section, std::string_view name, Config& config);

// The key table of docs/configuration.md: one Markdown row per key.
std::string key_table_markdown();

}  // namespace outboxd::config
