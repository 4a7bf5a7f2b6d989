// whizbang-relay's exit status (docs/relay.md, --help). A service manager restarts on any of
// them; 4 and 5 need the operator, and 5 means messages were lost.
#pragma once

#include <stdexcept>
#include <string>

namespace whizbang::relay {

enum ExitCode : int {
    kExitStopped = 0,         // SIGINT or SIGTERM: acknowledged messages confirmed, then stopped
    kExitInternal = 1,        // a bug or an unexpected failure
    kExitUsage = 2,           // bad command line
    kExitConnect = 3,         // the first connection failed (later losses are retried)
    kExitSlotUnusable = 4,    // slot or publication missing, not pgoutput, two_phase, other database
    kExitSlotLost = 5,        // the slot was invalidated: messages after its position are lost
    kExitSinkFailed = 6,      // the sink refused for good (configuration, fsync failure, …)
    kExitBadStream = 7,       // a malformed outbox message or replication stream
};

// Ends the relay with `code`; main.cpp logs what() as FATAL.
class Fatal : public std::runtime_error {
public:
    Fatal(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
    ExitCode code() const { return code_; }

private:
    ExitCode code_;
};

}  // namespace whizbang::relay
