// Uniqueness of a dedup key across generations (DESIGN §3.6 "Generations", issue 23).
//
// Dedup records live in time generations, each a table with its own unique index on the key, so
// the index of one generation cannot see a key inserted into another. Two deliveries of one id
// whose records go to different generations (at the start of a new generation, or a backfill
// with an old p_now next to a live delivery) must still not both be new. The inserter therefore
// runs this protocol per key, in the spirit of PostgreSQL's speculative insertion:
//
//   1. look (before_insert): every live generation, newest first, with a dirty snapshot (which
//      sees other transactions' rows still in progress). A live record: duplicate. Another
//      transaction's record in progress: wait for it (holding nothing of this key), look again.
//   2. insert the record speculatively into its own generation (that generation's unique index
//      settles a race inside it, as today);
//   3. look again (after_insert), in the other live generations only. A live record, or another
//      transaction's record whose insertion is complete: withdraw (remove the speculative record
//      and start again at 1, where the wait happens). Another transaction's speculative record:
//      the transaction with the older xid keeps its record and waits for the younger one's
//      insertion to end; the younger one withdraws. Nothing: the insertion is complete, the
//      key is new.
//
// A waiter in step 3 waits only for a younger transaction, and a waiter in step 1 holds no
// speculative record of the key, so no cycle of waits arises from this protocol (keys are
// handled in sorted order, so batches meet their keys in one order). test/unit/
// generation_guard_model_test.cpp runs random interleavings of it against the rule "at most one
// committed new per key", with commits, aborts and rollbacks at any step.
#pragma once

#include <cstdint>

#include "no_postgres.h"

namespace whizbang::core::generations {

// What a look found: the first conflicting record of another transaction.
enum class Found {
    none,
    live,       // committed (or the looker's own transaction's): the key is on record
    inserting,  // another transaction's speculative record, not yet kept or withdrawn
    inserted,   // another open transaction's record whose insertion is complete (or a record
                // that an open transaction is deleting)
};

struct Sighting {
    Found found = Found::none;
    std::uint32_t xid = 0;  // the other transaction (inserting, inserted)
};

enum class Before { insert, duplicate, wait };
Before before_insert(const Sighting& any_generation);

enum class After {
    keep,          // complete the speculative insertion: the key is new
    wait_keeping,  // wait for the other's speculative insertion to end, keep ours, look again
    withdraw,      // remove our speculative record, then begin again with before_insert
};
After after_insert(const Sighting& other_generations, std::uint32_t my_xid);

// PostgreSQL's order of normal transaction ids (TransactionIdPrecedes: modulo 2^32).
inline bool xid_precedes(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b) < 0; }

}  // namespace whizbang::core::generations
