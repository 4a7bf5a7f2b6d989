// Membership filters of sealed dedup generations (issue 31 item 3; DESIGN §3.6 "Generations",
// docs/internals.md "Sealed generations"): a generation whose span has ended is sealed by
// maintenance, which stores a Bloom filter of its keys (core/membership_filter.h) in
// whizbang.wh_dedup_filters; a store then looks a new id up in a sealed generation's index only
// when the filter answers "maybe".
//
// The protocol that makes skipping safe: no record may enter a sealed generation unseen.
//   - Sealed means: the generation carries the trigger wh_sealed (BEFORE INSERT OR UPDATE OF
//     message_id, consumer, ENABLE ALWAYS), which refuses every row written into it by SQL
//     (55000). Stores read the seal from the relation cache of the generation they open, which
//     the lock they take refreshes: no catalog query per call, and never older than the lock.
//   - Sealing takes SHARE ROW EXCLUSIVE on the generation (waits for every transaction that
//     wrote into it, holds off new writers; probes, ACCESS SHARE, go on), reads the keys with a
//     snapshot taken after the lock, stores the filter and creates the trigger in one
//     transaction.
//   - Unsealing (a store whose p_now falls into a sealed generation: a backfill; maintenance
//     moving records forward into one; whizbang.unseal_dedup_generation) takes ACCESS EXCLUSIVE
//     on the generation, so it waits for every store that may have skipped it by its filter and
//     holds off the next ones until its transaction ends; then drops the trigger and the filter.
#pragma once

#include <cstdint>

#include "core/membership_filter.h"
#include "pg/boundary/bridge.h"

namespace whizbang::pg {

constexpr const char* kSealTrigger = "wh_sealed";
constexpr const char* kFilterTable = "wh_dedup_filters";

// PostgreSQL side: what the triggers of a generation say. `sealed`: its only trigger is the seal
// (*seal: the trigger's oid, which names this seal: a new seal has a new oid).
enum class GenerationTriggers { none, sealed, other };
GenerationTriggers generation_triggers(Relation generation, Oid* seal);

// PostgreSQL side: the filter of a sealed generation, loaded once per seal into the backend's
// memory (read with a fresh snapshot: a seal committed after the caller's snapshot is seen, as
// the trigger is). nullptr when none is stored (a restore without it): look the index up.
struct LoadedFilter {
    Oid relid;
    Oid seal;
    std::uint64_t bits;
    std::uint64_t* words;
};
const LoadedFilter* sealed_filter(Oid relid, Oid seal);

// Seals the generations whose span ended at or before `now` and after `horizon` (those before
// leave the window: maintenance drops them), one subtransaction each (a lock not granted within
// lock_timeout_ms leaves that one for the next run); returns how many it sealed. Runs the DDL as
// the extension's owner; the caller checks the caller's rights.
int seal_generations(TimestampTz now, TimestampTz horizon, int lock_timeout_ms);

// Whether the generation is sealed now (pg_trigger, read without locking it).
bool generation_sealed(Oid relid);

// How long a store's unsealing waits for its lock (then 55P03): while ACCESS EXCLUSIVE waits for
// a transaction that holds the generation open (one left idle after a store), every store queues
// behind it.
constexpr int kUnsealLockTimeoutMs = 500;

// Unseals one generation (ACCESS EXCLUSIVE on it, then drops the trigger and the filter);
// false when it was not sealed. Runs the DDL as the extension's owner.
bool unseal_generation(Oid relid, int lock_timeout_ms = 0);

// Forgets the filter of a generation about to be dropped (the caller holds ACCESS EXCLUSIVE on
// the parent).
void forget_filter(Oid relid);

}  // namespace whizbang::pg
