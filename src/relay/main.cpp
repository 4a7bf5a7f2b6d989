// whizbang-relay: publishes whizbang's WAL outbox (DESIGN §3.10, docs/relay.md).
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/relay_options.h"
#include "relay/exit_codes.h"
#include "relay/log.h"
#include "relay/relay.h"
#include "relay/sink.h"

#ifndef WHIZBANG_VERSION
#define WHIZBANG_VERSION "unknown"
#endif

int main(int argc, char** argv) {
    using namespace whizbang;
    core::RelayOptions options;
    try {
        options = core::parse_relay_options(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const core::InputError& e) {
        std::fprintf(stderr, "whizbang-relay: %s\n", e.what());
        return relay::kExitUsage;
    }
    if (options.help) {
        std::fputs(core::relay_usage().c_str(), stdout);
        return relay::kExitStopped;
    }
    if (options.version) {
        std::printf("whizbang-relay %s\n", WHIZBANG_VERSION);
        return relay::kExitStopped;
    }
    relay::install_signal_handlers();
    try {
        return relay::run_relay(options);
    } catch (const relay::Fatal& e) {
        relay::log_fatal(e.what());
        return e.code();
    } catch (const std::exception& e) {
        relay::log_fatal(std::string("unexpected: ") + e.what());
        return relay::kExitInternal;
    }
}
