// The lease store (DESIGN §3.8). With shared_preload_libraries = 'whizbang' leases live in a
// shared hash table (lease_shm.cpp): a claim writes nothing, its transaction commits without a
// WAL flush. Otherwise they live in the work rows (the table store, as before 0.6.0); the work
// functions choose their path with shared_leases_active().
//
// A shared lease is keyed by (database, source, consumer, message id). Every change to it — a
// take, a take-over, an end by complete / fail / release / cancel / dead letter / delete — belongs
// to the transaction that makes it (src/core/lease_machine.h): until that transaction ends, or
// the prepared transaction it became is settled, every other transaction sees the lease as it
// was and finds the row busy; a commit makes the change, any rollback undoes it exactly. A
// server restart voids them all (the table is rebuilt empty).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/lease_machine.h"
#include "core/uuid.h"
#include "pg/boundary/bridge.h"

namespace whizbang::pg {

enum class Source;

// True in a server that loaded whizbang through shared_preload_libraries.
bool shared_leases_active();

// _PG_init while preloading: settings, shared memory, the object-access hook.
void lease_store_preload_init();

// The ends of transactions and subtransactions (module.cpp's dispatcher calls them before the
// waiters': a claim woken by a commit must find the rows that commit ended free).
void lease_store_at_xact(XactEvent event);
void lease_store_at_subxact(SubXactEvent event);

struct StreamCursor;

namespace shm {

struct LeaseKey {
    Source source;
    core::Uuid id{};
    std::string consumer;  // '' for the outbox
};

// A row's lease as the work functions see it (core/lease_machine.h), and whether another
// transaction is changing it right now (then it is no lease the caller can act on).
struct Lease : core::lease::Lease {
    bool ending = false;
};

enum class Take { taken, held, lapsed, full };

// A fresh token: larger than every token handed out before, also before a restart (a clock
// component, and a high-water mark kept in a file when tokens run ahead of the clock).
int64_t next_token();

// Takes the lease of a free row (no entry). A lapsed entry (expiry <= now, not ending) is left
// alone and returned in *old: the caller takes it over with take_over(). `held`: live or ending.
// `full`: the table has no room (counted in the stats).
Take take(const LeaseKey& key, const Lease& fresh, TimestampTz now, Lease* old);

// Takes over a lapsed lease still carrying `old_token`, voiding the old holder's entries in
// `run` (the rest of its run in the stream) that carry the same token — all or nothing: false
// (nothing changes) when the head is no longer lapsed with that token or a row of the run is
// ending right now. On success *voided holds the voided entries (their deliveries counted).
bool take_over(const LeaseKey& key, int64_t old_token, const Lease& fresh, TimestampTz now,
               const std::vector<LeaseKey>& run, std::vector<std::pair<LeaseKey, Lease>>* voided);

// The token a claim's leases carry until the claim has taken them all: negative, unique to the
// backend; retoken() then gives them the claim's real token (work_claim_shared.cpp).
int64_t provisional_token();
void retoken(const LeaseKey& key, int64_t from, int64_t to);

// Undoes a take of this call (the row turned out not to be claimable): the row's lease is what
// it was before the take, if the take's lease carrying `token` is still this transaction's.
void drop(const LeaseKey& key, int64_t token);

// Whether a claim at `now` would find the row's lease held (live, or changed by another
// transaction that has not ended): a quick look, the take decides.
bool held_now(const LeaseKey& key, TimestampTz now);

// The row's lease as this transaction sees it, if any (`ending`: another transaction is
// changing it).
std::optional<Lease> get(const LeaseKey& key);

// Ends the lease (gone when this transaction commits, back if it rolls back) when it carries `token`;
// kNoLease: when the row has no lease (a mark is left so that no claim takes the row until this
// transaction ends); nullopt: whatever it holds. Returns the lease as it was, or nullopt when
// there is none; *mismatch when the row's lease is not the one expected.
//
// A row without a lease needs an entry for its mark. When the table is full (after a sweep of
// ended prepared slots) the end is refused (53400: nothing is written) — unless `written`: this
// transaction has already deleted or updated the row, whose in-progress xmax keeps every claim's
// re-read off it until this transaction ends (read_picks, rows_changing_elsewhere), so the mark
// may be left out.
constexpr int64_t kNoLease = 0;
std::optional<Lease> end(const LeaseKey& key, std::optional<int64_t> token, bool* mismatch, bool written = false);

// Renews a lease that carries `token` and is not ending; false when it does not.
bool renew(const LeaseKey& key, int64_t token, TimestampTz expiry);

// Extends a live lease of `instance` carrying `token` (not ending, not lapsed at `now`) to
// `expiry`, atomically: a claim handing out rows its instance pre-leased at store keeps them
// from the moment it checks them. False when the lease is no longer that.
bool extend_live(const LeaseKey& key, int64_t token, const core::Uuid& instance, TimestampTz now, TimestampTz expiry);

// Updates the delivery count and expiry of a lease this call just handed out.
void set_delivery(const LeaseKey& key, int64_t token, int attempts, TimestampTz expiry);

// Every lease of this database (a copy, taken under the partition locks). The consumer is known
// by its hash there (consumer_hash()); the caller matches it against the work rows.
struct Listed {
    Source source;
    core::Uuid id{};
    uint64_t consumer_hash = 0;
    Lease lease;
};
std::vector<Listed> leases_of_database();
uint64_t consumer_hash(const std::string& consumer);

// The earliest expiry after `after` of a lease of this database that is not ending, of `source`
// (nullopt: both) and, for the inbox, of the consumer with `consumer_hash` (nullopt: any); or
// INT64_MAX. When such a lease lapses, its row can be claimed again.
TimestampTz earliest_expiry(std::optional<Source> source, std::optional<uint64_t> consumer_hash, TimestampTz after);

// Ends every lease of `source` in this database with this transaction (the work table is
// being truncated): gone at commit, held again on abort.
void end_all(Source source);

// Where the last claim of `source` in this database stopped its walk of the streams, shared by
// every backend, so that concurrent claims go on from each other's end instead of walking over
// the streams another claim has just taken. False when there is none (or the consumer of that
// position was too long to share): the caller uses its own.
bool shared_cursor(Source source, StreamCursor& cursor);
void set_shared_cursor(Source source, const StreamCursor& cursor);

// Settles every slot whose prepared transaction has ended (COMMIT PREPARED or ROLLBACK
// PREPARED ran): its entry goes, or its lease is back. Returns how many were settled. Called
// when a prepared transaction ends, by a take or an end that finds the table full, and by
// maintenance; cheap when no slot belongs to a prepared transaction.
int settle_prepared();

// Capacity and use, for stats(). `prepared`: slots held by prepared transactions.
struct Usage {
    int64_t max_leases = 0, in_use = 0, short_claims = 0, prepared = 0;
};
Usage usage();
void count_short_claim();

}  // namespace shm

// A lease as operators and the queue views see it: its row's consumer resolved.
struct LiveLease {
    Source source;
    core::Uuid id{};
    std::string consumer;
    shm::Lease lease;
};

// Shared-memory store: the leases of this database (of `only`, or both sources) whose row is
// unfinished, without those this transaction is ending. Empty with the table store.
std::vector<LiveLease> shared_leases(std::optional<Source> only);

// The shared leases as parameters of one statement, from parameter number `first` on:
// lease_params() gives their values (empty arrays with the table store), lease_relation() the
// relation over them, with columns source, message_id, consumer, instance_id, lease_token,
// lease_expiry, attempts. Statements read a row's lease as COALESCE(sl.<column>, w.<column>):
// one of the two stores is always empty.
constexpr int kLeaseParams = 7;
std::vector<Datum> lease_params(std::optional<Source> only);
std::vector<Oid> lease_param_types();
std::string lease_relation(int first);

}  // namespace whizbang::pg
