// The lease state machine (DESIGN §3.8): what takes, take-overs, renewals and ends do to one
// row's lease, and what the end of the transaction that made them does — commit, abort,
// subtransaction commit and abort, PREPARE, COMMIT PREPARED and ROLLBACK PREPARED.
//
// A row's lease lives in a Slot. Every other transaction goes by the slot's committed state.
// The first change a transaction makes makes it the slot's owner: from then on it sees, and
// changes, its own current state, and every other transaction finds the row busy (as a row
// lock would make it) until the owner's end settles the slot: a commit makes the current state
// the committed one, an abort drops it. PREPARE hands ownership from the backend to the
// prepared transaction's xid; whoever touches the slot next settles it from that xid's fate.
// So a rollback of any kind restores exactly what was there before, however many times the
// transaction released, re-took or took over the row, and a prepared end keeps its row from
// every claim until it is settled.
//
// Subtransactions: a transaction's Journal (lease_journal.h) remembers the state each slot had
// when a subtransaction first changed it, and puts it back when that subtransaction aborts.
//
// Everything here is plain data and pure functions: the shared-memory store runs them on its
// hash table entries under their partition lock, the tests on a std::map.
#pragma once

#include <cstdint>
#include <functional>

#include "no_postgres.h"
#include "uuid.h"

namespace whizbang::core::lease {

// One holder's lease of a row. Times are PostgreSQL timestamps (microseconds).
struct Lease {
    Uuid instance{};
    std::int64_t token = 0;
    std::int64_t expiry = 0;
    std::int32_t attempts = 0;  // this delivery's count
    bool has_stream = false;
    Uuid stream{};
    std::int64_t seq = 0;

    bool operator==(const Lease& o) const {
        return instance == o.instance && token == o.token && expiry == o.expiry && attempts == o.attempts &&
               has_stream == o.has_stream && stream == o.stream && seq == o.seq;
    }
};

// A row's lease, or none. Trivially copyable: it lives in shared memory.
struct State {
    bool present = false;
    Lease lease;

    static State none() { return State{}; }
    static State of(const Lease& l) { return State{true, l}; }
    bool operator==(const State& o) const { return present == o.present && (!present || lease == o.lease); }
    bool operator!=(const State& o) const { return !(*this == o); }
};

// Who owns a slot's pending change: an open transaction of a backend (pid and that backend's
// transaction serial), or, after PREPARE, the prepared transaction (its xid).
struct Owner {
    std::int32_t pid = 0;
    std::uint32_t serial = 0;
    std::uint32_t xid = 0;
    bool prepared = false;

    bool operator==(const Owner& o) const {
        return prepared == o.prepared && (prepared ? xid == o.xid : pid == o.pid && serial == o.serial);
    }
    bool operator!=(const Owner& o) const { return !(*this == o); }
    static Owner prepared_as(std::uint32_t xid) { return Owner{0, 0, xid, true}; }
};

struct Slot {
    State committed;
    bool owned = false;
    Owner owner;
    State current;  // the owner's state; meaningful while owned

    // Nothing to keep: no lease, no pending change (the store may forget the slot).
    bool empty() const { return !owned && !committed.present; }
};

// What became of a prepared transaction, as the commit log says.
enum class Fate { in_progress, committed, aborted };
using FateOf = std::function<Fate(std::uint32_t xid)>;

// Settles a slot whose prepared owner has ended: committed, its state becomes the committed
// one; aborted, it is dropped. Returns true when the slot changed.
bool settle(Slot& s, const FateOf& fate);

// The slot as it will be once settled, without changing it (for readers under a shared lock).
Slot settled(const Slot& s, const FateOf& fate);

// Whether another transaction's change to the slot is pending: the row is busy for `me`.
inline bool busy(const Slot& s, const Owner& me) { return s.owned && s.owner != me; }

// The state `me` goes by: its own current state when it owns the slot, else the committed one.
inline const State& visible(const Slot& s, const Owner& me) { return s.owned && s.owner == me ? s.current : s.committed; }

// The change `me` makes to the slot: takes ownership when it has none (current starts from the
// committed state) and returns the state before the change, for the journal.
State change(Slot& s, const Owner& me, const State& next);

// ---- the transitions of one row --------------------------------------------------------------

enum class Take { taken, held, lapsed };

// Takes the lease of a row that has none for `me`: `taken`. A live lease, or a row busy with
// another transaction's change: `held`. A lapsed lease (expiry <= now) is left alone and given
// in *old: the caller takes it over with take_over(). *before: the state before a take.
Take take(Slot& s, const Owner& me, const Lease& fresh, std::int64_t now, Lease* old, State* before);

// Takes over a lapsed lease still carrying `old_token`. False, nothing changed, otherwise.
bool take_over(Slot& s, const Owner& me, std::int64_t old_token, const Lease& fresh, std::int64_t now, State* before);

// Whether a row of the old holder's run may be voided with a take-over: true and *carries when
// the row's lease carries `token`; false (the take-over must not happen) when another
// transaction is changing the row right now.
bool may_void(const Slot& s, const Owner& me, std::int64_t token, bool* carries);

// Ends the lease (complete, fail, release, cancel, DELETE, TRUNCATE, void): it is gone for `me`
// at once and for everybody when `me` commits. `token`: only the lease carrying it (kNoLease:
// only a row without a lease, which is then kept from claims until `me` ends); nullptr: whatever
// lease the row has. Returns Ended::ended with *was (present or not) when ended; mismatch when
// the row's lease is not the one expected or another transaction is changing it; untouched when
// a token was given and the row has no lease.
constexpr std::int64_t kNoLease = 0;
enum class Ended { ended, mismatch, untouched };
Ended end(Slot& s, const Owner& me, const std::int64_t* token, State* was, State* before);

// Renews `me`'s view of a lease carrying `token` to `expiry`; false when there is none or
// another transaction is changing the row. Renewals are not transactional (as a heartbeat is
// not): the committed lease carrying the token is renewed too.
bool renew(Slot& s, const Owner& me, std::int64_t token, std::int64_t expiry);

// The same for a live lease of `instance` (not lapsed at `now`).
bool extend_live(Slot& s, const Owner& me, std::int64_t token, const Uuid& instance, std::int64_t now, std::int64_t expiry);

// Sets the delivery count and expiry of the lease carrying `token` (a claim's own take).
void set_delivery(Slot& s, std::int64_t token, std::int32_t attempts, std::int64_t expiry);

// Gives `me`'s lease carrying `from` the token `to` (a claim's provisional token, work_claim).
void retoken(Slot& s, const Owner& me, std::int64_t from, std::int64_t to);

// Whether a claim by `me` at `now` would find the row held: busy, or a live lease.
bool held(const Slot& s, const Owner& me, std::int64_t now);

// ---- the end of the owner's transaction --------------------------------------------------------

// Top-level commit / abort of the owner: the slot is settled.
void commit(Slot& s);
void abort(Slot& s);
// PREPARE: the pending change now belongs to the prepared transaction `xid`.
void prepare(Slot& s, std::uint32_t xid);
// A (sub)transaction abort puts back the state `saved` from when it first changed the slot;
// `release`: no enclosing level had changed it, so ownership ends too.
void restore(Slot& s, const State& saved, bool release);

}  // namespace whizbang::core::lease
