// Dedup generations (DESIGN §3.6 "Generations", docs/operations.md "Retention by generations"):
// from 0.12.0 whizbang.wh_message_deduplication is partitioned by range of first_seen_at, one
// partition per period. This file reads the generations, and creates the ones missing.
//
// Every change of the set of generations (create, drop) takes EXCLUSIVE lock on the parent
// first. Stores hold ROW EXCLUSIVE on it for the rest of their transaction, so while a store's
// transaction runs, the generations it probed and inserted into are the only ones: no
// generation can appear, uncommitted and unseen, with a record of a key in it.
#pragma once

#include <string>
#include <vector>

#include "core/generation_span.h"
#include "pg/boundary/bridge.h"

namespace whizbang::pg {

constexpr const char* kDedupTable = "wh_message_deduplication";

// One generation: [start, end) in timestamptz microseconds; a bound of MINVALUE (the records
// of the single table an upgrade attached) is INT64_MIN.
struct GenerationBound {
    Oid relid;
    int64 start;
    int64 end;
};

// PostgreSQL side (creates no C++ object, for use inside pg_call): the generations of the
// partitioned `parent`, sorted by start, in a palloc'd array; returns their count.
int read_generation_bounds(Relation parent, GenerationBound** out);

// Whether whizbang.wh_message_deduplication is partitioned into generations (0.12.0 on a
// single server; a distributed install keeps a plain table, docs/scaleout.md).
bool dedup_in_generations();

// The length of a generation: the retention window cut into dedup_generations parts, rounded
// up to whole hours (settings: dedup_retention_days, dedup_generations).
int64 generation_period();

// LOCK TABLE whizbang.wh_message_deduplication IN <mode> MODE; with lock_timeout_ms > 0, a lock
// not granted in time raises 55P03 (lock_timeout for this statement only).
void lock_dedup_table(const char* mode, int lock_timeout_ms);
// The same for any table (`qualified_name` quoted as needed).
void lock_table(const std::string& qualified_name, const char* mode, int lock_timeout_ms);

// Creates, under EXCLUSIVE lock on the parent, the generations that [from, until) lacks, and
// returns how many. With `lock_timeout_ms` > 0 a lock not granted in time raises 55P03.
int create_generations(TimestampTz from, TimestampTz until, int lock_timeout_ms = 0);

// Before a store records with `p_now` on a table in generations (issue 30 item 10,
// core::generations::place): false when no generation holds p_now and its own would have left
// the window (the store records nothing); raises 22023 when it would lie beyond the generations
// made ahead; else makes the generation when it is missing, or unseals it when sealed (before the
// store opens the table for writing: two stores that both need it then queue for its lock
// instead of deadlocking) and returns true.
bool generation_for_store(TimestampTz p_now);

// The generations as (relid, span), sorted by start (takes ACCESS SHARE on the parent).
std::vector<GenerationBound> list_generations();

}  // namespace whizbang::pg
