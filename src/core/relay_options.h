// Command line of whizbang-relay (docs/relay.md): parsed here, without a server, so that every
// refusal is unit-tested and worded once.
#pragma once

#include <string>
#include <vector>

#include "no_postgres.h"

namespace whizbang::core {

struct RelayOptions {
    std::string slot;                            // --slot NAME (required)
    std::string publication = "whizbang_outbox";  // --publication NAME
    std::string sink;                            // --sink URI (required)
    std::string dbname;                          // --dbname CONNINFO; empty: libpq's PG* defaults
    int status_interval_s = 10;                  // --status-interval SECONDS, 1..3600
    bool help = false;                           // --help: print usage, exit 0
    bool version = false;                        // --version
};

// Parses argv[1..] ("--opt value" or "--opt=value"). --help and --version need nothing else.
// Throws InputError(invalid_parameter) with a message fit for the user.
RelayOptions parse_relay_options(const std::vector<std::string>& args);

// The --help text.
std::string relay_usage();

}  // namespace whizbang::core
