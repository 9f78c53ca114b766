// Catch2 entry point for the AMQP publisher's integration tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
