// The shared-memory lease store (DESIGN §3.8, lease_store.h): a partitioned shared hash table of
// lease slots, the token counter, and the glue between PostgreSQL's transactions and the lease
// state machine of src/core (lease_machine.h), which decides every transition.
//
// Every operation holds one partition lock (take_over and the listing hold several, in
// partition order) for a few field reads and writes: nothing inside a lock allocates or waits
// (the journal's record is made ready before), so a lock is never held across a C++ error.
// A slot whose owner is a prepared transaction is settled from the commit log when that
// transaction ends (COMMIT PREPARED / ROLLBACK PREPARED: settle_prepared()), and by whoever
// touches it first, which may look the xid up in the commit log under the lock.
#include <algorithm>
#include <cstring>

#include "core/lease_journal.h"
#include "pg/lease/lease_store.h"
#include "pg/citus/shard_scope.h"
#include "pg/claim/work.h"

extern "C" {
#include "common/hashfn.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "access/transam.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "storage/proc.h"
}

namespace whizbang::pg {
namespace {

constexpr int kPartitions = 16;
constexpr const char* kTranche = "whizbang_leases";
// Tokens are drawn from the clock (microseconds since 2000) or above it; when one runs ahead of
// the clock, a mark this far above it is written to this file first, so a restart never draws
// a token again (DESIGN §3.8).
constexpr const char* kTokenFile = "whizbang_lease_tokens";
constexpr int64_t kTokenReserve = 10 * USECS_PER_SEC;

namespace lm = core::lease;
using shm::kNoLease;

struct SharedKey {
    Oid database;
    int32 source;
    uint64 consumer_hash;
    uint8 id[16];
};
static_assert(sizeof(SharedKey) == 32, "SharedKey is compared and hashed as bytes: no padding");

struct SharedEntry {
    SharedKey key;  // first: dynahash's rule
    lm::Slot slot;
};

// The shared stream-walk positions (shm::shared_cursor): one per database and source, in a
// small table that forgets the least recently written when a new database needs a place.
constexpr int kCursors = 64;
constexpr int kCursorConsumer = 64;  // bytes of consumer name a shared position holds
struct SharedCursor {
    Oid database;  // InvalidOid: free
    int32 source;
    bool set;
    uint8 stream[16];
    int32 consumer_len;
    char consumer[kCursorConsumer];
    uint64 written;  // when (in `Control::cursor_clock` ticks)
};

struct Control {
    pg_atomic_uint64 changes;  // bumped whenever a slot may have changed: earliest_expiry's cache
    pg_atomic_uint64 last_token;
    pg_atomic_uint64 short_claims;
    pg_atomic_uint32 prepared;  // slots owned by a prepared transaction: settle_prepared() has work
    int64 token_mark;  // the mark in kTokenFile; under the extra lock
    slock_t cursor_lock;
    uint64 cursor_clock;  // under cursor_lock
    SharedCursor cursors[kCursors];
};

int max_leases = 100000;
bool active = false;
HTAB* table = nullptr;
Control* control = nullptr;
LWLockPadded* locks = nullptr;  // kPartitions partition locks, then the token-file lock
shmem_request_hook_type prev_request = nullptr;
shmem_startup_hook_type prev_startup = nullptr;

Size shared_size() {
    return add_size(MAXALIGN(sizeof(Control)), hash_estimate_size(max_leases, sizeof(SharedEntry)));
}

void request_shmem() {
    if (prev_request) prev_request();
    RequestAddinShmemSpace(shared_size());
    RequestNamedLWLockTranche(kTranche, kPartitions + 1);
}

int64 read_token_file() {
    FILE* f = AllocateFile(kTokenFile, "r");
    if (!f) return 0;
    long long mark = 0;
    if (fscanf(f, "%lld", &mark) != 1) mark = 0;
    FreeFile(f);
    return mark;
}

void startup_shmem() {
    if (prev_startup) prev_startup();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    control = static_cast<Control*>(ShmemInitStruct("whizbang lease control", sizeof(Control), &found));
    if (!found) {
        const int64 start = std::max<int64>(GetCurrentTimestamp(), read_token_file());
        pg_atomic_init_u64(&control->changes, 0);
        SpinLockInit(&control->cursor_lock);
        control->cursor_clock = 0;
        memset(control->cursors, 0, sizeof(control->cursors));
        pg_atomic_init_u64(&control->last_token, static_cast<uint64>(start));
        pg_atomic_init_u64(&control->short_claims, 0);
        pg_atomic_init_u32(&control->prepared, 0);
        control->token_mark = start;
    }
    HASHCTL info;
    memset(&info, 0, sizeof(info));
    info.keysize = sizeof(SharedKey);
    info.entrysize = sizeof(SharedEntry);
    info.num_partitions = kPartitions;
    table = ShmemInitHash("whizbang leases", max_leases, max_leases, &info,
                          HASH_ELEM | HASH_BLOBS | HASH_PARTITION | HASH_FIXED_SIZE);
    LWLockRelease(AddinShmemInitLock);
    locks = GetNamedLWLockTranche(kTranche);
}

// ---- this transaction's lease changes: the journal its end settles -------------------------

struct SharedKeyEqual {
    bool operator()(const SharedKey& a, const SharedKey& b) const { return memcmp(&a, &b, sizeof(a)) == 0; }
};
using LeaseJournal = lm::Journal<SharedKey, SharedKeyEqual>;
LeaseJournal journal;

// This backend's transactions are told apart by a serial: a slot owned by an earlier one (there
// should be none: every end settles its slots) is never taken for this one's.
uint32 serial = 1;
lm::Owner me() { return lm::Owner{MyProcPid, serial, 0, false}; }

// What became of a prepared transaction: as heapam asks, in progress first, then the commit log.
// Slots are settled when their prepared transaction ends, long before VACUUM can truncate the
// commit log past its xid; should one be missed (a backend that died between the two), its xid
// is never looked up in a segment that is gone ("could not access status of transaction"): an
// xid older than the commit log ended long ago and counts as committed — its lease, if it took
// one, lapsed long since, and the row of an end it made is gone or free either way.
lm::Fate xid_fate(uint32 xid) {
    if (TransactionIdIsInProgress(xid)) return lm::Fate::in_progress;
    LWLockAcquire(XactTruncationLock, LW_SHARED);
    const bool known = !TransactionIdPrecedes(xid, compat::oldest_clog_xid());
    const bool committed = !known || TransactionIdDidCommit(xid);
    LWLockRelease(XactTruncationLock);
    return committed ? lm::Fate::committed : lm::Fate::aborted;
}
const lm::FateOf fate = xid_fate;

// Databases whose whizbang (or the whole database) this transaction drops: their leases are
// freed when it commits. A fixed array: the hook that fills it runs on PostgreSQL's side, and a
// transaction drops one database (DROP DATABASE runs alone) or one extension.
constexpr int kMaxDropped = 4;
Oid dropped_databases[kMaxDropped];
int dropped_count = 0;

SharedKey shared_key(const shm::LeaseKey& k) {
    SharedKey key;
    memset(&key, 0, sizeof(key));
    key.database = MyDatabaseId;
    key.source = static_cast<int32>(k.source);
    key.consumer_hash = shm::consumer_hash(k.consumer);
    memcpy(key.id, k.id.data(), 16);
    return key;
}

LWLock* partition_lock(uint32 hash) { return &locks[hash % kPartitions].lock; }

SharedEntry* find(const SharedKey& key, uint32 hash) {
    return static_cast<SharedEntry*>(hash_search_with_hash_value(table, &key, hash, HASH_FIND, nullptr));
}

// A new entry (found: the existing one), nullptr when the table is full.
SharedEntry* enter(const SharedKey& key, uint32 hash) {
    bool found = false;
    return static_cast<SharedEntry*>(hash_search_with_hash_value(table, &key, hash, HASH_ENTER_NULL, &found));
}

void remove(const SharedKey& key, uint32 hash) { hash_search_with_hash_value(table, &key, hash, HASH_REMOVE, nullptr); }

// A lease may lapse earlier than earliest_expiry's last answer: one was taken, renewed, or put
// back by a rollback. (Ends and commits only make leases go: a cached answer is then early,
// which wakes a waiter for a look that finds nothing, never late.)
void touched() { pg_atomic_fetch_add_u64(&control->changes, 1); }

// Settles a slot whose prepared owner has ended (under its partition lock): true when it did.
// A lease may be back (ROLLBACK PREPARED of an end): earliest_expiry's cached answer goes.
bool settle_slot(lm::Slot& s) {
    if (!lm::settle(s, fate)) return false;
    pg_atomic_fetch_sub_u32(&control->prepared, 1);
    touched();
    return true;
}

// One slot under its partition lock (held by the caller), settled first. A row without an entry
// gets a scratch slot; keep() stores what the transition left in it.
struct Locked {
    SharedKey key;
    uint32 hash;
    SharedEntry* entry;
    lm::Slot scratch;

    bool settled = false;  // a prepared owner's end was settled here

    Locked(const SharedKey& k, uint32 h) : key(k), hash(h), entry(find(k, h)) {
        if (entry) settled = settle_slot(entry->slot);  // a prepared transaction's fate
    }
    lm::Slot& slot() { return entry ? entry->slot : scratch; }
    // False when a new entry was needed and the table is full: nothing was stored, and the
    // scratch slot is cleared (a later keep() stores nothing either).
    bool keep() {
        if (entry) {
            if (entry->slot.empty()) {
                remove(key, hash);
                entry = nullptr;
            }
            return true;
        }
        if (scratch.empty()) return true;
        entry = enter(key, hash);
        if (!entry) {
            scratch = lm::Slot{};
            return false;
        }
        entry->slot = scratch;
        return true;
    }
};


// The journal's end of a transaction on each slot it changed: `settle(slot)` when the slot is
// still this transaction's.
template <typename F>
void settle_journal(F settle) {
    const lm::Owner owner = me();
    journal.finish([&](const SharedKey& key, uint32 hash) {
        LWLock* lock = partition_lock(hash);
        LWLockAcquire(lock, LW_EXCLUSIVE);
        SharedEntry* e = find(key, hash);
        if (e && e->slot.owned && e->slot.owner == owner) {
            settle(e->slot);
            if (e->slot.empty()) remove(key, hash);
        }
        LWLockRelease(lock);
    });
}

void free_dropped_databases();

void on_xact(XactEvent event) {
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
            settle_journal([](lm::Slot& s) { lm::commit(s); });
            free_dropped_databases();
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            if (!journal.empty()) {
                settle_journal([](lm::Slot& s) { lm::abort(s); });
                touched();  // leases are back that the transaction had ended
            }
            dropped_count = 0;
            break;
        case XACT_EVENT_PREPARE: {
            // The changes now belong to the prepared transaction: whoever runs COMMIT PREPARED
            // or ROLLBACK PREPARED, whenever, the next look at a slot settles it by the xid.
            const uint32 xid = GetTopTransactionIdIfAny();
            settle_journal([xid](lm::Slot& s) {
                if (!TransactionIdIsValid(xid)) return lm::abort(s);
                lm::prepare(s, xid);
                pg_atomic_fetch_add_u32(&control->prepared, 1);
            });
            // A prepared DROP takes effect at COMMIT PREPARED, in another session: its leases are
            // left to lapse (the database's are no use to anybody).
            dropped_count = 0;
            break;
        }
        default:
            return;
    }
    ++serial;
}

void on_subxact(SubXactEvent event) {
    if (journal.empty()) return;
    const int level = GetCurrentTransactionNestLevel();
    if (event == SUBXACT_EVENT_COMMIT_SUB) {
        journal.commit_sub(level);
    } else if (event == SUBXACT_EVENT_ABORT_SUB) {
        const lm::Owner owner = me();
        journal.abort_sub(level, [&](const SharedKey& key, uint32 hash, const lm::State& saved, bool release) {
            LWLock* lock = partition_lock(hash);
            LWLockAcquire(lock, LW_EXCLUSIVE);
            SharedEntry* e = find(key, hash);
            if (e && e->slot.owned && e->slot.owner == owner) {
                lm::restore(e->slot, saved, release);
                if (e->slot.empty()) remove(key, hash);
            }
            LWLockRelease(lock);
            touched();
        });
    }
}

shm::Lease lease_of(const lm::Lease& l) {
    shm::Lease out;
    static_cast<lm::Lease&>(out) = l;
    return out;
}

// The lease of a slot as `owner` lists it: its own view; another transaction's pending change
// shows the committed lease, or the lease that transaction is taking (marked ending: it is no
// lease the caller can act on).
std::optional<shm::Lease> listed_lease(const lm::Slot& s, const lm::Owner& owner) {
    if (!lm::busy(s, owner)) {
        const lm::State& v = lm::visible(s, owner);
        if (!v.present) return std::nullopt;
        return lease_of(v.lease);
    }
    const lm::State& shown = s.committed.present ? s.committed : s.current;
    shm::Lease l = shown.present ? lease_of(shown.lease) : shm::Lease{};
    l.ending = true;
    return l;
}

void require_active() {
    if (!active) throw SqlError(ERRCODE_INTERNAL_ERROR, "whizbang: the shared-memory lease store is not loaded");
}

// Runs f(Locked&) on the slot of `k` under its partition lock and returns what it returns. f
// runs on the PostgreSQL side: it must not throw or allocate.
template <typename F>
auto with_slot(const SharedKey& key, uint32 hash, F f) {
    return pg_call([&] {
        LWLock* lock = partition_lock(hash);
        LWLockAcquire(lock, LW_EXCLUSIVE);
        Locked locked(key, hash);
        auto result = f(locked);
        locked.keep();  // an entry settled empty goes; a transition on a new row was kept by f
        LWLockRelease(lock);
        return result;
    });
}

uint32 key_hash(const SharedKey& key) { return get_hash_value(table, &key); }

// Holds the locks of a set of partitions, in partition order (no deadlock between holders).
class PartitionLocks {
public:
    explicit PartitionLocks(const std::vector<uint32>& hashes, LWLockMode mode = LW_EXCLUSIVE) {
        for (uint32 h : hashes) held_[h % kPartitions] = true;
        for (int p = 0; p < kPartitions; ++p)
            if (held_[p]) LWLockAcquire(&locks[p].lock, mode);
    }
    // All partitions.
    explicit PartitionLocks(LWLockMode mode) {
        for (int p = 0; p < kPartitions; ++p) {
            held_[p] = true;
            LWLockAcquire(&locks[p].lock, mode);
        }
    }
    ~PartitionLocks() {
        for (int p = kPartitions - 1; p >= 0; --p)
            if (held_[p]) LWLockRelease(&locks[p].lock);
    }

private:
    bool held_[kPartitions] = {};
};

// Frees every lease slot of the databases this transaction dropped whizbang from (or dropped).
void free_dropped_databases() {
    if (dropped_count == 0) return;
    const Oid* dropped_end = dropped_databases + dropped_count;
    PartitionLocks all(LW_EXCLUSIVE);
    HASH_SEQ_STATUS scan;
    hash_seq_init(&scan, table);
    while (SharedEntry* e = static_cast<SharedEntry*>(hash_seq_search(&scan)))
        if (std::find(static_cast<const Oid*>(dropped_databases), dropped_end, e->key.database) != dropped_end) {
            if (e->slot.owned && e->slot.owner.prepared) pg_atomic_fetch_sub_u32(&control->prepared, 1);
            remove(e->key, get_hash_value(table, &e->key));  // dynahash allows removing the entry just returned
        }
    dropped_count = 0;
}

object_access_hook_type prev_object_access = nullptr;

// DROP DATABASE, and DROP EXTENSION whizbang: the leases of that database go at commit.
void on_object_access(ObjectAccessType access, Oid class_id, Oid object_id, int sub_id, void* arg) {
    if (prev_object_access) prev_object_access(access, class_id, object_id, sub_id, arg);
    if (access != OAT_DROP) return;
    Oid database = InvalidOid;
    if (class_id == DatabaseRelationId) database = object_id;
    else if (class_id == ExtensionRelationId && object_id == get_extension_oid("whizbang", true)) database = MyDatabaseId;
    if (OidIsValid(database) && dropped_count < kMaxDropped) dropped_databases[dropped_count++] = database;
}

void write_token_mark(int64 mark) {
    const std::string tmp = std::string(kTokenFile) + ".tmp";
    FILE* f = AllocateFile(tmp.c_str(), PG_BINARY_W);
    if (!f) ereport(ERROR, (errcode_for_file_access(), errmsg("could not write \"%s\": %m", tmp.c_str())));
    fprintf(f, "%lld\n", static_cast<long long>(mark));
    if (fflush(f) != 0 || pg_fsync(fileno(f)) != 0) {
        FreeFile(f);
        ereport(ERROR, (errcode_for_file_access(), errmsg("could not write \"%s\": %m", tmp.c_str())));
    }
    FreeFile(f);
    durable_rename(tmp.c_str(), kTokenFile, ERROR);
}

}  // namespace

// A routed call on a Citus node keeps its leases in the rows: a shard can move to another node,
// and a distributed install has no lease triggers on its work tables (docs/scaleout.md).
bool shared_leases_active() { return active && !in_shard_scope(); }

void lease_store_at_xact(XactEvent event) {
    if (active) on_xact(event);
}

void lease_store_at_subxact(SubXactEvent event) {
    if (active) on_subxact(event);
}

void lease_store_preload_init() {
    DefineCustomIntVariable("whizbang.max_leases",
                            "Leases the shared-memory lease store can hold at once; when it is full a claim hands out "
                            "fewer rows (counted in stats()).",
                            nullptr, &max_leases, 100000, 100, 100000000, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    prev_request = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_startup = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
    prev_object_access = object_access_hook;
    object_access_hook = on_object_access;
    active = true;
}

namespace shm {

uint64_t consumer_hash(const std::string& consumer) {
    return hash_bytes_extended(reinterpret_cast<const unsigned char*>(consumer.data()), static_cast<int>(consumer.size()), 0);
}

int64_t next_token() {
    require_active();
    return pg_call([] {
        const uint64 clock = static_cast<uint64>(GetCurrentTimestamp());
        uint64 last = pg_atomic_read_u64(&control->last_token);
        uint64 next;
        do {
            next = std::max(last + 1, clock);
        } while (!pg_atomic_compare_exchange_u64(&control->last_token, &last, next));
        if (next > clock) {
            // Ahead of the clock: a restart would start below this token unless the file says so.
            LWLock* lock = &locks[kPartitions].lock;
            LWLockAcquire(lock, LW_EXCLUSIVE);
            if (static_cast<int64>(next) >= control->token_mark) {
                const int64 mark = static_cast<int64>(next) + kTokenReserve;
                write_token_mark(mark);
                control->token_mark = mark;
            }
            LWLockRelease(lock);
        }
        return static_cast<int64_t>(next);
    });
}

Take take(const LeaseKey& k, const Lease& fresh, TimestampTz now, Lease* old) {
    require_active();
    const SharedKey key = shared_key(k);
    const uint32 hash = key_hash(key);
    const int level = GetCurrentTransactionNestLevel();
    journal.ready();
    const lm::Lease l = static_cast<const lm::Lease&>(fresh);
    auto attempt = [&](Locked& at) {
        lm::Lease lapsed;
        lm::State before;
        const bool first = !at.slot().owned;
        switch (lm::take(at.slot(), me(), l, now, &lapsed, &before)) {
            case lm::Take::held:
                return Take::held;
            case lm::Take::lapsed:
                *old = lease_of(lapsed);
                return Take::lapsed;
            case lm::Take::taken:
                break;
        }
        if (!at.keep()) return Take::full;
        journal.noted(key, hash, level, before, first);
        touched();
        return Take::taken;
    };
    const Take took = with_slot(key, hash, attempt);
    // Slots of prepared transactions that have ended may fill the table (one that ended without
    // settling them, in a backend that died): settled, they make room.
    if (took == Take::full && settle_prepared() > 0) return with_slot(key, hash, attempt);
    return took;
}

bool take_over(const LeaseKey& k, int64_t old_token, const Lease& fresh, TimestampTz now, const std::vector<LeaseKey>& run,
               std::vector<std::pair<LeaseKey, Lease>>* voided) {
    require_active();
    const int level = GetCurrentTransactionNestLevel();
    const SharedKey head = shared_key(k);
    std::vector<SharedKey> keys;
    keys.reserve(run.size());
    for (const LeaseKey& r : run) keys.push_back(shared_key(r));
    std::vector<uint32> hashes(keys.size() + 1);
    for (std::size_t i = 0; i < keys.size(); ++i) hashes[i] = key_hash(keys[i]);
    hashes.back() = key_hash(head);
    journal.ready(keys.size() + 1);
    std::vector<char> in_run(keys.size(), 0);
    std::vector<lm::Lease> old(keys.size());
    voided->clear();
    voided->reserve(run.size());
    const lm::Lease l = static_cast<const lm::Lease&>(fresh);
    const lm::Owner owner = me();
    const bool ok = pg_call([&] {
        PartitionLocks held(hashes);
        Locked h(head, hashes.back());
        if (!h.entry) return false;
        lm::Slot trial = h.entry->slot;
        lm::State before;
        if (!lm::take_over(trial, owner, old_token, l, now, &before)) return false;
        // All or nothing: a row of the run that another transaction is ending stops it.
        for (std::size_t i = 0; i < keys.size(); ++i) {
            SharedEntry* e = find(keys[i], hashes[i]);
            if (!e) continue;
            settle_slot(e->slot);
            bool carries = false;
            if (!lm::may_void(e->slot, owner, old_token, &carries)) return false;
            in_run[i] = carries;
        }
        for (std::size_t i = 0; i < keys.size(); ++i) {
            if (!in_run[i]) continue;
            SharedEntry* e = find(keys[i], hashes[i]);
            lm::State was, saved;
            const bool first = !e->slot.owned;
            (void)lm::end(e->slot, owner, &old_token, &was, &saved);
            old[i] = was.lease;
            journal.noted(keys[i], hashes[i], level, saved, first);
        }
        const bool first = !h.entry->slot.owned;
        (void)lm::take_over(h.entry->slot, owner, old_token, l, now, &before);
        journal.noted(head, hashes.back(), level, before, first);
        touched();
        return true;
    });
    if (ok)
        for (std::size_t i = 0; i < keys.size(); ++i)
            if (in_run[i]) voided->emplace_back(run[i], lease_of(old[i]));
    return ok;
}

int64_t provisional_token() { return -static_cast<int64_t>(compat::my_proc_number()) - 1; }

void retoken(const LeaseKey& k, int64_t from, int64_t to) {
    require_active();
    const SharedKey key = shared_key(k);
    with_slot(key, key_hash(key), [&](Locked& at) {
        if (at.entry) lm::retoken(at.entry->slot, me(), from, to);
        return true;
    });
}

void drop(const LeaseKey& k, int64_t token) {
    require_active();
    const SharedKey key = shared_key(k);
    const uint32 hash = key_hash(key);
    const int level = GetCurrentTransactionNestLevel();
    journal.ready();
    with_slot(key, hash, [&](Locked& at) {
        if (at.entry) (void)journal.undo_take(key, hash, at.entry->slot, me(), token, level);
        return true;
    });
}

bool held_now(const LeaseKey& k, TimestampTz now) {
    require_active();
    const SharedKey key = shared_key(k);
    const uint32 hash = key_hash(key);
    return pg_call([&] {
        LWLock* lock = partition_lock(hash);
        LWLockAcquire(lock, LW_SHARED);
        SharedEntry* e = find(key, hash);
        // A prepared owner that has ended is settled by the next take, not here (shared lock).
        const bool held = e && lm::held(lm::settled(e->slot, fate), me(), now);
        LWLockRelease(lock);
        return held;
    });
}

std::optional<Lease> get(const LeaseKey& k) {
    require_active();
    const SharedKey key = shared_key(k);
    const lm::Owner owner = me();
    return with_slot(key, key_hash(key), [&](Locked& at) {
        std::optional<Lease> out;
        if (at.entry) out = listed_lease(at.entry->slot, owner);
        at.keep();
        return out;
    });
}

std::optional<Lease> end(const LeaseKey& k, std::optional<int64_t> token, bool* mismatch, bool written) {
    require_active();
    const SharedKey key = shared_key(k);
    const uint32 hash = key_hash(key);
    const int level = GetCurrentTransactionNestLevel();
    journal.ready();
    *mismatch = false;
    bool unrecorded = false;
    auto attempt = [&](Locked& at) {
        std::optional<Lease> out;
        lm::State was, before;
        const bool first = !at.slot().owned;
        const lm::Ended ended = lm::end(at.slot(), me(), token ? &*token : nullptr, &was, &before);
        if (ended == lm::Ended::mismatch) *mismatch = true;
        if (ended != lm::Ended::ended) return out;
        // A row without a lease needs an entry for its mark (no claim takes it until this
        // transaction ends); in a full table there is none to be had.
        if (!at.keep()) {
            unrecorded = true;
            return out;
        }
        unrecorded = false;
        journal.noted(key, hash, level, before, first);
        if (was.present) out = lease_of(was.lease);
        return out;
    };
    std::optional<Lease> out = with_slot(key, hash, attempt);
    if (unrecorded && settle_prepared() > 0) out = with_slot(key, hash, attempt);
    if (unrecorded && !written)
        throw SqlError(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                       "whizbang: the shared-memory lease store is full: the end of message " + core::to_string(k.id) +
                           " (a row nobody holds) cannot be recorded",
                       "whizbang.max_leases = " + std::to_string(max_leases) +
                           " leases are held; a claim would hand out this row while this transaction ends it.",
                       "Complete or release held leases first, end claimed rows with their lease tokens, or raise "
                       "whizbang.max_leases (a restart).");
    return out;
}

bool renew(const LeaseKey& k, int64_t token, TimestampTz expiry) {
    require_active();
    const SharedKey key = shared_key(k);
    const bool renewed =
        with_slot(key, key_hash(key), [&](Locked& at) { return at.entry && lm::renew(at.entry->slot, me(), token, expiry); });
    if (renewed) touched();
    return renewed;
}

bool extend_live(const LeaseKey& k, int64_t token, const core::Uuid& instance, TimestampTz now, TimestampTz expiry) {
    require_active();
    const SharedKey key = shared_key(k);
    return with_slot(key, key_hash(key), [&](Locked& at) {
        return at.entry && lm::extend_live(at.entry->slot, me(), token, instance, now, expiry);
    });
}

void set_delivery(const LeaseKey& k, int64_t token, int attempts, TimestampTz expiry) {
    require_active();
    const SharedKey key = shared_key(k);
    with_slot(key, key_hash(key), [&](Locked& at) {
        if (at.entry) lm::set_delivery(at.entry->slot, token, attempts, expiry);
        return true;
    });
}

}  // namespace shm

namespace {
// What `pick(entry, out)` keeps of every entry of the table, read under every partition lock in
// shared mode. Room for every entry is made before the locks are taken (nothing allocates under
// them; `pick` adds at most one item per entry); when the table grew in between, once more with
// the larger count. The result is complete.
template <typename T, typename Pick>
std::vector<T> collect(Pick pick) {
    std::vector<T> out;
    for (std::size_t room = static_cast<std::size_t>(hash_get_num_entries(table)) + 64;; room *= 2) {
        out.clear();
        out.reserve(room);
        const bool complete = pg_call([&] {
            PartitionLocks all(LW_SHARED);
            if (static_cast<std::size_t>(hash_get_num_entries(table)) > out.capacity()) return false;
            HASH_SEQ_STATUS scan;
            hash_seq_init(&scan, table);
            while (SharedEntry* e = static_cast<SharedEntry*>(hash_seq_search(&scan))) pick(*e, out);
            return true;
        });
        if (complete) return out;
    }
}
}  // namespace

namespace shm {

std::vector<Listed> leases_of_database() {
    require_active();
    const lm::Owner owner = me();
    return collect<Listed>([&](const SharedEntry& e, std::vector<Listed>& out) {
        if (e.key.database != MyDatabaseId) return;
        const std::optional<Lease> l = listed_lease(lm::settled(e.slot, fate), owner);
        // Leases of a claim still under way (provisional tokens) are listed once it is done.
        if (!l || l->token <= kNoLease) return;
        Listed item;
        item.source = static_cast<Source>(e.key.source);
        memcpy(item.id.data(), e.key.id, 16);
        item.consumer_hash = e.key.consumer_hash;
        item.lease = *l;
        out.push_back(item);
    });
}

TimestampTz earliest_expiry(std::optional<Source> source, std::optional<uint64_t> consumer_hash, TimestampTz after) {
    require_active();
    // A waiting claim asks on each look that finds nothing. While no slot changes, the answer for
    // a later `after` below the last answer is that answer: the table is scanned again only when
    // something changed (the scan holds every partition lock).
    struct Asked {
        uint64 changes = 0;
        Oid database = InvalidOid;
        std::optional<Source> source;
        std::optional<uint64_t> consumer_hash;
        TimestampTz after = 0, answer = 0;
        bool set = false;
    };
    static Asked last;
    const uint64 changes = pg_atomic_read_u64(&control->changes);
    if (last.set && last.changes == changes && last.database == MyDatabaseId && last.source == source &&
        last.consumer_hash == consumer_hash && last.after <= after && after < last.answer)
        return last.answer;
    const TimestampTz answer = pg_call([&] {
        TimestampTz earliest = PG_INT64_MAX;
        // A scan visits every bucket of the table, however few entries it holds.
        if (hash_get_num_entries(table) == 0) return earliest;
        PartitionLocks all(LW_SHARED);
        HASH_SEQ_STATUS scan;
        hash_seq_init(&scan, table);
        while (SharedEntry* e = static_cast<SharedEntry*>(hash_seq_search(&scan))) {
            if (e->key.database != MyDatabaseId) continue;
            if (source && e->key.source != static_cast<int32>(*source)) continue;
            if (consumer_hash && e->key.source == static_cast<int32>(Source::inbox) && e->key.consumer_hash != *consumer_hash)
                continue;
            // A lease whose row another transaction is changing lapses into nothing claimable
            // until that transaction ends (its end wakes the waiters).
            const lm::Slot s = lm::settled(e->slot, fate);
            const lm::State& st = s.owned ? s.current : s.committed;
            if (!st.present || st.lease.token <= kNoLease || st.lease.expiry <= after) continue;
            earliest = std::min(earliest, st.lease.expiry);
        }
        return earliest;
    });
    last = Asked{changes, MyDatabaseId, source, consumer_hash, after, answer, true};
    return answer;
}

void end_all(Source source) {
    require_active();
    // Two passes: the keys first, then each ended with its journal record made ready. TRUNCATE
    // holds the work table exclusively, so no lease of this source is taken in between.
    const std::vector<SharedKey> keys = collect<SharedKey>([&](const SharedEntry& e, std::vector<SharedKey>& out) {
        if (e.key.database == MyDatabaseId && e.key.source == static_cast<int32>(source)) out.push_back(e.key);
    });
    const int level = GetCurrentTransactionNestLevel();
    const lm::Owner owner = me();
    for (const SharedKey& key : keys) {
        const uint32 hash = key_hash(key);
        journal.ready();
        with_slot(key, hash, [&](Locked& at) {
            lm::State was, before;
            const bool first = at.entry && !at.entry->slot.owned;
            if (at.entry && lm::end(at.entry->slot, owner, nullptr, &was, &before) == lm::Ended::ended)
                journal.noted(key, hash, level, before, first);
            at.keep();
            return true;
        });
    }
}

}  // namespace shm

namespace {
SharedCursor* cursor_of(Source source, bool create) {
    SharedCursor* oldest = nullptr;
    for (SharedCursor& c : control->cursors) {
        if (c.database == MyDatabaseId && c.source == static_cast<int32>(source)) return &c;
        if (!oldest || c.written < oldest->written) oldest = &c;
    }
    if (!create) return nullptr;
    oldest->database = MyDatabaseId;
    oldest->source = static_cast<int32>(source);
    oldest->set = false;
    return oldest;
}
}  // namespace

namespace shm {

bool shared_cursor(Source source, StreamCursor& cursor) {
    if (!active) return false;
    bool found = false, set = false;
    uint8 stream[16];
    char consumer[kCursorConsumer];
    int len = 0;
    SpinLockAcquire(&control->cursor_lock);
    if (SharedCursor* c = cursor_of(source, false); c && c->consumer_len >= 0) {
        found = true;
        set = c->set;
        memcpy(stream, c->stream, 16);
        len = c->consumer_len;
        memcpy(consumer, c->consumer, static_cast<std::size_t>(len));
    }
    SpinLockRelease(&control->cursor_lock);
    if (!found) return false;
    cursor.set = set;
    memcpy(cursor.stream.data(), stream, 16);
    cursor.consumer.assign(consumer, static_cast<std::size_t>(len));
    return true;
}

void set_shared_cursor(Source source, const StreamCursor& cursor) {
    if (!active) return;
    // A consumer name too long to share marks the place unusable: each backend keeps its own.
    const bool fits = cursor.consumer.size() <= static_cast<std::size_t>(kCursorConsumer);
    SpinLockAcquire(&control->cursor_lock);
    SharedCursor* c = cursor_of(source, true);
    c->set = cursor.set;
    memcpy(c->stream, cursor.stream.data(), 16);
    c->consumer_len = fits ? static_cast<int32>(cursor.consumer.size()) : -1;
    if (fits) memcpy(c->consumer, cursor.consumer.data(), cursor.consumer.size());
    c->written = ++control->cursor_clock;
    SpinLockRelease(&control->cursor_lock);
}

int settle_prepared() {
    if (!active || pg_atomic_read_u32(&control->prepared) == 0) return 0;
    // The keys first (under every partition lock, shared), then each slot under its own lock,
    // settled there by Locked if its prepared owner has ended.
    const std::vector<SharedKey> keys = collect<SharedKey>([](const SharedEntry& e, std::vector<SharedKey>& out) {
        if (e.slot.owned && e.slot.owner.prepared) out.push_back(e.key);
    });
    int settled = 0;
    for (const SharedKey& key : keys)
        settled += with_slot(key, key_hash(key), [](Locked& at) { return at.settled ? 1 : 0; });
    return settled;
}

Usage usage() {
    Usage u;
    if (!active) return u;
    u.max_leases = max_leases;
    u.prepared = pg_atomic_read_u32(&control->prepared);
    u.in_use = pg_call([] { return static_cast<int64_t>(hash_get_num_entries(table)); });
    u.short_claims = static_cast<int64_t>(pg_atomic_read_u64(&control->short_claims));
    return u;
}

void count_short_claim() {
    if (active) pg_atomic_fetch_add_u64(&control->short_claims, 1);
}

}  // namespace shm
}  // namespace whizbang::pg
