// The claim algorithm of claim_work (DESIGN §3.4), written once for both lease stores (§3.8).
//
// One source of one claim_work call: the rows stored pre-leased to the instance first; then, in
// rounds, stream heads and rows without a stream (which kind fills the claim first alternates
// between a backend's claims, so neither starves the other), the heads' followers, and the
// hand-out. A round that dead-lettered rows, or whose picks turned out not claimable, leaves
// room: another round looks again (at most 8). Stream heads come from the stream walk
// (work_pick_reader.h), from a starting point that rotates between claims; a head another
// claim takes first is passed over and the walk goes on, a few times at most.
//
// What differs between the stores is how a row is taken and handed out, behind ClaimStore:
// the table store locks rows (SKIP LOCKED) and writes the lease into them
// (claim_store_rows.cpp); the shared-memory store takes leases in shared memory and reads the
// rows again afterwards (claim_store_shared.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pg/claim/work.h"
#include "pg/claim/work_pick_reader.h"

namespace whizbang::pg {

// A row a claim looks at, takes, and hands out.
struct Pick {
    shm::LeaseKey key;
    int attempts = 0;                  // deliveries before this one
    std::optional<core::Uuid> stream;  // a streamed row
    int64_t seq = 0;                   // its stream position
    TimestampTz due = 0;
    bool head = false;                 // taken as its stream's head: followers may come along
    int64_t token = 0;                 // the lease it carries; 0: the claim's own, drawn later
    TimestampTz expiry = 0;
};

// What a hand-out did.
struct HandOut {
    std::vector<Pick> heads;  // stream heads handed out (or to be), whose followers may come along
    int handed = 0;           // rows added to claim_work's result
    int pending = 0;          // rows kept for end_round() (+), or handed out from there (-)
    int dead = 0;             // rows moved to the dead letters instead
    int rejected = 0;         // picks that were not claimable after all
};

class ClaimStore {
public:
    virtual ~ClaimStore() = default;
    // Up to `room` rows stored pre-leased to the claiming instance that are still its.
    virtual std::vector<Pick> preleased(int room) = 0;
    // Takes up to `room` due rows without a stream.
    virtual std::vector<Pick> take_unstreamed(int room) = 0;
    // Whether the stream walk's row may be taken: it is not under a live lease.
    virtual bool free(const StreamRow& row) = 0;
    // Takes up to `room` of the stream heads, in their order, each still due, free and the
    // oldest unfinished row of its stream.
    virtual std::vector<Pick> take_heads(const std::vector<Pick>& heads, int room) = 0;
    // Takes the rows of each run in order, a run stopping at the first row it cannot take; at
    // most `room` in all.
    virtual std::vector<Pick> take_runs(const std::vector<std::vector<Pick>>& runs, int room) = 0;
    // Hands out the picks (those out of attempts go to the dead letters). `taken_here`: this
    // claim took their leases (pre-leased rows came with theirs).
    virtual HandOut hand_out(const std::vector<Pick>& picks, bool taken_here) = 0;
    // Whatever hand_out kept for the end of a round, handed out.
    virtual HandOut end_round() { return {}; }
    // The store could not take a row for want of room (the shared-memory table is full).
    virtual bool full() const { return false; }
};

// The claim's p_partitions as a lookup by partition number (empty: every partition).
std::vector<char> partition_lookup(const Claim& c);

// Forgets the pre-leased entries of rows a claim handed back to `instance` (ClaimStore::preleased).
void forget_preleased(Source source, const core::Uuid& instance, const std::vector<core::Uuid>& ids,
                      const std::vector<std::string>& consumers);

// Claims up to c.max_rows rows of c.source through `store`; returns how many were handed out.
int run_claim(const Claim& c, ClaimStore& store);

}  // namespace whizbang::pg
