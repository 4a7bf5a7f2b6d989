// The relay's loop (DESIGN §3.10): read the slot, publish each committed transaction's
// whizbang.outbox messages in commit order, flush the sink, and only then confirm the
// transaction's end to the slot. Connection losses and transient sink errors start over from
// the slot's confirmed position after a capped pause; an unusable or invalidated slot, a sink
// refusing for good and a malformed stream end the relay (Fatal).
#pragma once

#include <memory>
#include <string>

#include "core/relay_options.h"
#include "relay/exit_codes.h"
#include "relay/sink.h"

namespace whizbang::relay {

// Runs until SIGINT/SIGTERM (returns kExitStopped) or a Fatal is thrown.
ExitCode run_relay(const core::RelayOptions& options);

// Installs the SIGINT/SIGTERM handlers run_relay stops on, and ignores SIGPIPE (a sink's
// closed socket or pipe is an error return, not the end of the process).
void install_signal_handlers();

}  // namespace whizbang::relay
