// The logical replication slots of the current database, read from shared memory: what the WAL
// outbox (DESIGN §3.10) depends on. emit_outbox_messages refuses to emit where no slot would
// decode the messages; stats() reports the slots' lag and the WAL they hold back. whizbang
// cannot tell the relay's slot from another logical consumer's, so every logical slot of the
// database counts.
#pragma once

#include <cstdint>

namespace whizbang::pg {

struct LogicalSlots {
    int64_t valid = 0;        // usable: not invalidated
    int64_t invalidated = 0;  // lost (max_slot_wal_keep_size, or a conflict on a standby)
    // Of the valid slots, the largest distance from the WAL's end to the confirmed flush
    // position (what a relay has not yet acknowledged) and to the restart position (the WAL
    // the server keeps for them); 0 without a valid slot.
    int64_t max_lag_bytes = 0;
    int64_t max_retained_bytes = 0;
};

LogicalSlots logical_slots();

}  // namespace whizbang::pg
