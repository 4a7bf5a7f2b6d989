#include "relay_options.h"

#include "error.h"

namespace whizbang::core {
namespace {

[[noreturn]] void refuse(const std::string& message) {
    throw InputError(InputError::Kind::invalid_parameter, message);
}

int parse_interval(const std::string& text) {
    if (text.empty() || text.size() > 4) refuse("--status-interval must be a whole number of seconds from 1 to 3600, not '" + text + "'");
    int v = 0;
    for (char c : text) {
        if (c < '0' || c > '9') refuse("--status-interval must be a whole number of seconds from 1 to 3600, not '" + text + "'");
        v = v * 10 + (c - '0');
    }
    if (v < 1 || v > 3600) refuse("--status-interval must be a whole number of seconds from 1 to 3600, not '" + text + "'");
    return v;
}

}  // namespace

RelayOptions parse_relay_options(const std::vector<std::string>& args) {
    RelayOptions o;
    bool have_slot = false, have_sink = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        std::string name = args[i], value;
        bool inline_value = false;
        if (name.rfind("--", 0) == 0) {
            const auto eq = name.find('=');
            if (eq != std::string::npos) {
                value = name.substr(eq + 1);
                name = name.substr(0, eq);
                inline_value = true;
            }
        }
        if (name == "--help" || name == "-h") {
            o.help = true;
            continue;
        }
        if (name == "--version" || name == "-V") {
            o.version = true;
            continue;
        }
        if (name != "--slot" && name != "--publication" && name != "--sink" && name != "--dbname" &&
            name != "--status-interval") {
            if (name.rfind("-", 0) == 0) refuse("unknown option " + name + " (see --help)");
            refuse("unexpected argument '" + name + "' (see --help)");
        }
        if (!inline_value) {
            if (i + 1 >= args.size()) refuse(name + " needs a value");
            value = args[++i];
        }
        if (name == "--slot") {
            if (value.empty()) refuse("--slot must not be empty");
            o.slot = value;
            have_slot = true;
        } else if (name == "--publication") {
            if (value.empty()) refuse("--publication must not be empty");
            o.publication = value;
        } else if (name == "--sink") {
            if (value.empty()) refuse("--sink must not be empty");
            o.sink = value;
            have_sink = true;
        } else if (name == "--dbname") {
            o.dbname = value;
        } else {
            o.status_interval_s = parse_interval(value);
        }
    }
    if (o.help || o.version) return o;
    if (!have_slot) refuse("--slot is required: the logical replication slot (plugin pgoutput) to read");
    if (!have_sink) refuse("--sink is required, e.g. --sink ndjson:/var/lib/whizbang/outbox.ndjson");
    return o;
}

std::string relay_usage() {
    return "whizbang-relay publishes whizbang's WAL outbox messages (whizbang.emit_outbox_messages)\n"
           "from a logical replication slot to a sink, in commit order, at least once.\n"
           "\n"
           "Usage: whizbang-relay --slot NAME --sink URI [OPTION]...\n"
           "\n"
           "  --slot NAME               logical replication slot with plugin pgoutput (required;\n"
           "                            not two_phase)\n"
           "  --sink URI                ndjson:PATH (append one line per message; ndjson:- is\n"
           "                            stdout), http(s)://..., amqp(s)://... (required)\n"
           "  --publication NAME        publication named to pgoutput (default whizbang_outbox;\n"
           "                            an empty one: CREATE PUBLICATION whizbang_outbox)\n"
           "  --dbname CONNINFO         connection string or URI of the slot's database\n"
           "                            (default: libpq's PGHOST, PGDATABASE, ... environment)\n"
           "  --status-interval SECONDS how often the confirmed position is reported (default 10)\n"
           "  --help, --version\n"
           "\n"
           "Exit status: 0 stopped by SIGINT/SIGTERM (or --help, --version); 1 internal error;\n"
           "2 usage; 3 cannot connect at start; 4 slot or publication unusable (missing, not\n"
           "pgoutput, two_phase, other database); 5 slot invalidated: messages were lost;\n"
           "6 the sink refused for good; 7 a message or the stream was malformed.\n";
}

}  // namespace whizbang::core
