# Writes a C++ source holding every migration script as a raw string literal.
# Run as: cmake -DSQL_FILES=a.sql|b.sql -DOUTPUT=file.cpp -P embed_sql.cmake
# The file list comes from the configure-time glob, so adding or removing a
# script changes this command line and Ninja regenerates the source.
cmake_policy(VERSION 3.25)
string(REPLACE "|" ";" files "${SQL_FILES}")
set(literals "")
set(entries "")
set(versions "")
set(index 0)
foreach(path IN LISTS files)
  if(path STREQUAL "")
    continue()
  endif()
  get_filename_component(name "${path}" NAME)
  if(NOT name MATCHES "^([0-9]+)_[A-Za-z0-9_]+\\.sql$")
    message(FATAL_ERROR "${path}: migration scripts are named NNN_name.sql (digits, underscore, letters)")
  endif()
  math(EXPR version "${CMAKE_MATCH_1}")
  if(version IN_LIST versions)
    message(FATAL_ERROR "${path}: another script already has version ${version}")
  endif()
  list(APPEND versions ${version})

  file(READ "${path}" content)
  file(READ "${path}" bytes HEX)
  string(REGEX MATCH "^(..)*0d" carriage_return "${bytes}")
  if(carriage_return)
    # The checksum is of the bytes; CRLF checkouts would change it per machine,
    # and the compiler would fold CRLF inside the literal anyway.
    message(FATAL_ERROR "${path}: has CR line endings; migration scripts must use LF only")
  endif()
  file(SHA256 "${path}" checksum)

  # A raw-string delimiter that the script cannot contain.
  set(delimiter "sql")
  set(attempt 0)
  string(FIND "${content}" ")${delimiter}\"" clash)
  while(NOT clash EQUAL -1)
    math(EXPR attempt "${attempt} + 1")
    set(delimiter "sql${attempt}")
    string(FIND "${content}" ")${delimiter}\"" clash)
  endwhile()

  string(APPEND literals "constexpr char kScript${index}[] = R\"${delimiter}(${content})${delimiter}\";\n")
  set(view "std::string_view(kScript${index}, sizeof(kScript${index}) - 1)")
  string(APPEND entries "    {${version}, \"${name}\", ${view}, \"${checksum}\"},\n")
  math(EXPR index "${index} + 1")
endforeach()

set(text "// Generated from sql/*.sql by lib/pg/embed_sql.cmake at build time; edit the scripts, not this file.\n")
string(APPEND text "#include \"pg/embedded_migrations.hpp\"\n\nnamespace outboxd::pg {\n")
if(index EQUAL 0)
  string(APPEND text "\nstd::span<const EmbeddedScript> embedded_scripts() { return {}; }\n")
else()
  string(APPEND text "namespace {\n\n${literals}\n")
  string(APPEND text "constexpr EmbeddedScript kScripts[] = {\n${entries}};\n\n}  // namespace\n\n")
  string(APPEND text "std::span<const EmbeddedScript> embedded_scripts() { return kScripts; }\n")
endif()
string(APPEND text "\n}  // namespace outboxd::pg\n")

file(WRITE "${OUTPUT}.tmp" "${text}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
