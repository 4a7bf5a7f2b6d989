// Retention by generations (DESIGN §3.6 "Generations"): the part of purge_old_deduplication
// that works on whole generations of whizbang.wh_message_deduplication (store/generations.h).
#pragma once

#include <cstdint>
#include <vector>

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

struct GenerationRetirement {
    int64_t created = 0;  // generations made ahead of time
    int64_t dropped = 0;  // generations dropped whole
    int64_t records = 0;  // records dropped with them
    int64_t moved = 0;    // records moved forward first (their message still waits)
    int64_t busy = 0;     // generations left for the next run: their lock was not granted in time
    int64_t sealed = 0;   // generations sealed with a membership filter (dedup_filters.h)
    // Expired generations left alone: the transaction reads with one snapshot (REPEATABLE READ,
    // SERIALIZABLE), older than the locks that decide which records still wait.
    bool needs_fresh_snapshot = false;
};

// Creates the generations of now and of the next period, and drops every generation that left
// the window (its end <= now - dedup_retention_days), in two subtransactions: beside the
// stores, the expired generations are locked against new records and the records whose message
// still waits in the inbox or in its dead letters are found; then, a moment under ACCESS
// EXCLUSIVE lock on the table (no row is deleted one by one), those records move to the oldest
// generation that stays (first_seen_at becomes its start), the generations ahead are made and
// the expired ones dropped. A lock not granted within lock_timeout_ms leaves the work to the
// next run. Under REPEATABLE READ or SERIALIZABLE only the generations ahead are made (see
// needs_fresh_snapshot). With SPI connected.
void retire_generations(TimestampTz now, int lock_timeout_ms, GenerationRetirement& out);

}  // namespace whizbang::pg
