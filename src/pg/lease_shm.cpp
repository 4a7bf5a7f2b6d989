// The shared-memory lease store (DESIGN §3.8, lease_store.h): a partitioned shared hash table of
// leases, the token counter, and the transaction callbacks that end leases at commit.
//
// Every operation holds one partition lock (take_over and the listing hold several, in
// partition order) for a few field reads and writes: nothing inside a lock can fail, allocate
// or wait, so a lock is never held across a PostgreSQL error.
#include <algorithm>
#include <cstring>

#include "pg/lease_store.h"
#include "pg/shard_scope.h"
#include "pg/work.h"

extern "C" {
#include "common/hashfn.h"
#include "port/atomics.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "access/transam.h"
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

// An entry with token kNoLease holds no lease: it only marks a row whose end (a cancel, an
// unfenced completion, a delete) is not committed yet, so that no claim hands the row out.
using shm::kNoLease;

struct SharedKey {
    Oid database;
    int32 source;
    uint64 consumer_hash;
    uint8 id[16];
};

struct SharedEntry {
    SharedKey key;  // first: dynahash's rule
    uint8 instance[16];
    int64 token;
    TimestampTz expiry;
    uint8 stream[16];
    int64 seq;
    int32 attempts;
    bool has_stream;
    bool ending;
    int ending_proc;           // the backend whose transaction ends it
    TransactionId ending_xid;  // that transaction's xid, when it has one
};

struct Control {
    pg_atomic_uint64 last_token;
    pg_atomic_uint64 short_claims;
    int64 token_mark;  // the mark in kTokenFile; under the extra lock
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
        pg_atomic_init_u64(&control->last_token, static_cast<uint64>(start));
        pg_atomic_init_u64(&control->short_claims, 0);
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

// ---- this transaction's leases: what its commit or abort does to them ----------------------

struct Pending {
    SharedKey key;
    uint32 hash;
    int64 token;
    bool ending;  // marked ending (commit removes, abort unmarks); else taken (abort removes)
    int level;    // subtransaction nest level
    bool restore = false;  // a lease this transaction voided (a takeover): back if it aborts
    SharedEntry old{};
};
std::vector<Pending> pending;

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

// An entry marked ending by a transaction that is over without having told us (its backend
// prepared it, or is between its commit and its callback): settled from the commit log.
// Returns false when the entry is gone.
bool settle(SharedEntry* e, uint32 hash) {
    if (!e->ending || !TransactionIdIsValid(e->ending_xid) || TransactionIdIsInProgress(e->ending_xid)) return true;
    if (TransactionIdDidCommit(e->ending_xid)) {
        remove(e->key, hash);
        return false;
    }
    e->ending = false;
    e->ending_xid = InvalidTransactionId;
    return true;
}

// Ended by this backend's open transaction: gone for it (as a row it deleted or updated is),
// so its own claims may take the row again.
bool ended_here(const SharedEntry* e) { return e->ending && e->ending_proc == MyProc->pgprocno; }

void finish_pending(bool commit, int from_level) {
    for (auto it = pending.rbegin(); it != pending.rend(); ++it) {
        if (it->level < from_level) continue;
        LWLock* lock = partition_lock(it->hash);
        LWLockAcquire(lock, LW_EXCLUSIVE);
        SharedEntry* e = find(it->key, it->hash);
        if (it->restore) {
            // Taken over by this transaction, which aborts: the old holder has it again (unless
            // somebody holds it by now, or the table is full).
            if (!commit && !e && (e = enter(it->key, it->hash))) *e = it->old;
        } else if (e && e->token == it->token) {
            if (it->ending && e->ending) {
                if (commit || e->token == kNoLease) remove(it->key, it->hash);
                else {
                    e->ending = false;
                    e->ending_xid = InvalidTransactionId;
                }
            } else if (!it->ending && !commit && !e->ending) {
                remove(it->key, it->hash);
            }
        }
        LWLockRelease(lock);
    }
    pending.erase(std::remove_if(pending.begin(), pending.end(), [from_level](const Pending& p) { return p.level >= from_level; }),
                  pending.end());
    // A big transaction (a TRUNCATE ends every lease of a table) does not keep its list's memory
    // for the life of the backend; swapping with an empty vector frees without allocating.
    if (pending.empty() && pending.capacity() > 4096) std::vector<Pending>().swap(pending);
}

void on_xact(XactEvent event, void*) {
    if (pending.empty()) return;
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
            finish_pending(true, 0);
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            finish_pending(false, 0);
            break;
        case XACT_EVENT_PREPARE:
            // Ending marks with an xid are settled from the commit log once the prepared
            // transaction ends (settle()); the others end now, as at a commit.
            for (const Pending& p : pending) {
                if (!p.ending) continue;
                LWLock* lock = partition_lock(p.hash);
                LWLockAcquire(lock, LW_EXCLUSIVE);
                SharedEntry* e = find(p.key, p.hash);
                if (e && e->token == p.token && e->ending && !TransactionIdIsValid(e->ending_xid)) remove(p.key, p.hash);
                LWLockRelease(lock);
            }
            pending.clear();
            break;
        default:
            break;
    }
}

void on_subxact(SubXactEvent event, SubTransactionId, SubTransactionId, void*) {
    if (pending.empty()) return;
    const int level = GetCurrentTransactionNestLevel();
    if (event == SUBXACT_EVENT_ABORT_SUB) finish_pending(false, level);
    else if (event == SUBXACT_EVENT_COMMIT_SUB)
        for (Pending& p : pending)
            if (p.level >= level) p.level = level - 1;
}

void remember(const SharedKey& key, uint32 hash, int64 token, bool ending) {
    pending.push_back({key, hash, token, ending, GetCurrentTransactionNestLevel()});
}

void remember_voided(const SharedEntry* e, uint32 hash) {
    Pending p{e->key, hash, e->token, false, GetCurrentTransactionNestLevel()};
    p.restore = true;
    p.old = *e;
    pending.push_back(p);
}

// Ending with this backend's transaction: removed at its commit, unmarked at its abort.
void mark_ending(SharedEntry* e, TransactionId xid, uint32 hash) {
    e->ending = true;
    e->ending_proc = MyProc->pgprocno;
    e->ending_xid = xid;
    remember(e->key, hash, e->token, true);
}

shm::Lease lease_of(const SharedEntry* e) {
    shm::Lease l;
    memcpy(l.instance.data(), e->instance, 16);
    l.token = e->token;
    l.expiry = e->expiry;
    l.attempts = e->attempts;
    l.has_stream = e->has_stream;
    memcpy(l.stream.data(), e->stream, 16);
    l.seq = e->seq;
    l.ending = e->ending;
    l.ended_here = ended_here(e);
    return l;
}

void fill(SharedEntry* e, const shm::Lease& l) {
    memcpy(e->instance, l.instance.data(), 16);
    e->token = l.token;
    e->expiry = l.expiry;
    e->attempts = l.attempts;
    e->has_stream = l.has_stream;
    memcpy(e->stream, l.stream.data(), 16);
    e->seq = l.seq;
    e->ending = false;
    e->ending_proc = -1;
    e->ending_xid = InvalidTransactionId;
}

void require_active() {
    if (!active) throw SqlError(ERRCODE_INTERNAL_ERROR, "whizbang: the shared-memory lease store is not loaded");
}

// Runs f(key, hash, entry or nullptr) under the lock of the partition of `k`'s entry and returns
// what it returns. f runs on the PostgreSQL side: it must not throw or allocate.
template <typename F>
auto with_entry(const shm::LeaseKey& k, LWLockMode mode, F f) {
    require_active();
    const SharedKey key = shared_key(k);
    return pg_call([&] {
        const uint32 hash = get_hash_value(table, &key);
        LWLock* lock = partition_lock(hash);
        LWLockAcquire(lock, mode);
        auto result = f(key, hash, find(key, hash));
        LWLockRelease(lock);
        return result;
    });
}

// Holds the locks of a set of partitions, in partition order (no deadlock between holders).
class PartitionLocks {
public:
    explicit PartitionLocks(const std::vector<uint32>& hashes) {
        for (uint32 h : hashes) held_[h % kPartitions] = true;
        for (int p = 0; p < kPartitions; ++p)
            if (held_[p]) LWLockAcquire(&locks[p].lock, LW_EXCLUSIVE);
    }
    ~PartitionLocks() {
        for (int p = kPartitions - 1; p >= 0; --p)
            if (held_[p]) LWLockRelease(&locks[p].lock);
    }

private:
    bool held_[kPartitions] = {};
};

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

void lease_store_preload_init() {
    DefineCustomIntVariable("whizbang.max_leases",
                            "Leases the shared-memory lease store can hold at once; when it is full a claim hands out "
                            "fewer rows (counted in stats()).",
                            nullptr, &max_leases, 100000, 100, 100000000, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    prev_request = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_startup = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
    RegisterXactCallback(on_xact, nullptr);
    RegisterSubXactCallback(on_subxact, nullptr);
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
    pending.reserve(pending.size() + 1);
    return with_entry(k, LW_EXCLUSIVE, [&](const SharedKey& key, uint32 hash, SharedEntry* e) {
        const bool present = e && settle(e, hash);  // false: none, or settled away just now
        if (present && !ended_here(e)) {
            if (e->ending || e->expiry > now) return Take::held;
            *old = lease_of(e);
            return Take::lapsed;
        }
        if (!present) e = enter(key, hash);
        if (!e) return Take::full;
        fill(e, fresh);
        remember(key, hash, fresh.token, false);
        return Take::taken;
    });
}

bool take_over(const LeaseKey& k, int64_t old_token, const Lease& fresh, TimestampTz now, const std::vector<LeaseKey>& run,
               std::vector<std::pair<LeaseKey, Lease>>* voided) {
    require_active();
    SharedKey head = shared_key(k);
    std::vector<SharedKey> keys;
    keys.reserve(run.size());
    for (const LeaseKey& r : run) keys.push_back(shared_key(r));
    std::vector<uint32> hashes(keys.size() + 1);
    std::vector<char> in_run(keys.size(), 0);
    voided->clear();
    voided->reserve(run.size());
    pending.reserve(pending.size() + run.size() + 2);
    std::vector<Lease> old(keys.size());
    const bool ok = pg_call([&] {
        for (std::size_t i = 0; i < keys.size(); ++i) hashes[i] = get_hash_value(table, &keys[i]);
        hashes.back() = get_hash_value(table, &head);
        PartitionLocks held(hashes);
        SharedEntry* h = find(head, hashes.back());
        if (!h || !settle(h, hashes.back()) || h->ending || h->expiry > now || h->token != old_token) return false;
        for (std::size_t i = 0; i < keys.size(); ++i) {
            SharedEntry* e = find(keys[i], hashes[i]);
            if (!e || !settle(e, hashes[i]) || e->token != old_token) continue;
            if (e->ending && !ended_here(e)) return false;  // being completed right now: not this time
            old[i] = lease_of(e);
            in_run[i] = 1;
        }
        for (std::size_t i = 0; i < keys.size(); ++i)
            if (in_run[i]) {
                remember_voided(find(keys[i], hashes[i]), hashes[i]);
                remove(keys[i], hashes[i]);
            }
        remember_voided(h, hashes.back());
        fill(h, fresh);
        remember(head, hashes.back(), fresh.token, false);
        return true;
    });
    if (ok)
        for (std::size_t i = 0; i < keys.size(); ++i)
            if (in_run[i]) voided->emplace_back(run[i], old[i]);
    return ok;
}

int64_t provisional_token() { return -static_cast<int64_t>(MyProc->pgprocno) - 1; }

void retoken(const LeaseKey& k, int64_t from, int64_t to) {
    with_entry(k, LW_EXCLUSIVE, [&](const SharedKey& key, uint32, SharedEntry* e) {
        if (e && e->token == from) e->token = to;
        for (Pending& p : pending)
            if (p.token == from && memcmp(&p.key, &key, sizeof(key)) == 0) p.token = to;
        return true;
    });
}

void drop(const LeaseKey& k, int64_t token) {
    with_entry(k, LW_EXCLUSIVE, [&](const SharedKey& key, uint32 hash, SharedEntry* e) {
        if (e && e->token == token && !e->ending) remove(key, hash);
        return true;
    });
}

bool held_now(const LeaseKey& k, TimestampTz now) {
    return with_entry(k, LW_SHARED, [&](const SharedKey&, uint32, SharedEntry* e) {
        // An end whose transaction is over is settled by the take, not here (shared lock).
        const bool over = e && e->ending && TransactionIdIsValid(e->ending_xid) && !TransactionIdIsInProgress(e->ending_xid);
        return e && !ended_here(e) && !over && (e->ending || e->expiry > now);
    });
}

std::optional<Lease> get(const LeaseKey& k) {
    return with_entry(k, LW_EXCLUSIVE, [&](const SharedKey&, uint32 hash, SharedEntry* e) {
        std::optional<Lease> out;
        if (e && settle(e, hash)) out = lease_of(e);
        return out;
    });
}

std::optional<Lease> end(const LeaseKey& k, std::optional<int64_t> token, bool* mismatch) {
    pending.reserve(pending.size() + 1);
    const TransactionId xid = GetTopTransactionIdIfAny();
    const bool expect_none = token && *token == kNoLease;
    *mismatch = false;
    return with_entry(k, LW_EXCLUSIVE, [&](const SharedKey& key, uint32 hash, SharedEntry* e) {
        std::optional<Lease> out;
        if (e && settle(e, hash)) {
            if (expect_none && ended_here(e)) {
                // Already being ended by this transaction: no lease holds the row.
            } else if ((token && *token != e->token) || e->ending) {
                *mismatch = true;
            } else {
                out = lease_of(e);
                mark_ending(e, xid, hash);
            }
        } else if ((!token || expect_none) && (e = enter(key, hash))) {
            // No lease: mark the row as being ended all the same (removed at commit or abort).
            fill(e, shm::Lease{});
            e->token = kNoLease;
            mark_ending(e, xid, hash);
        }
        return out;
    });
}

bool renew(const LeaseKey& k, int64_t token, TimestampTz expiry) {
    return with_entry(k, LW_EXCLUSIVE, [&](const SharedKey&, uint32 hash, SharedEntry* e) {
        const bool ok = e && settle(e, hash) && e->token == token && !e->ending;
        if (ok) e->expiry = expiry;
        return ok;
    });
}

bool extend_live(const LeaseKey& k, int64_t token, const core::Uuid& instance, TimestampTz now, TimestampTz expiry) {
    return with_entry(k, LW_EXCLUSIVE, [&](const SharedKey&, uint32 hash, SharedEntry* e) {
        const bool ok = e && settle(e, hash) && e->token == token && !e->ending && e->expiry > now &&
                        memcmp(e->instance, instance.data(), 16) == 0;
        if (ok) e->expiry = expiry;
        return ok;
    });
}

void set_delivery(const LeaseKey& k, int64_t token, int attempts, TimestampTz expiry) {
    with_entry(k, LW_EXCLUSIVE, [&](const SharedKey&, uint32, SharedEntry* e) {
        if (e && e->token == token) {
            e->attempts = attempts;
            e->expiry = expiry;
        }
        return true;
    });
}

std::vector<Listed> leases_of_database() {
    require_active();
    std::vector<Listed> out;
    out.reserve(static_cast<std::size_t>(hash_get_num_entries(table)) + 64);
    pg_call([&] {
        for (int p = 0; p < kPartitions; ++p) LWLockAcquire(&locks[p].lock, LW_SHARED);
        HASH_SEQ_STATUS scan;
        hash_seq_init(&scan, table);
        while (SharedEntry* e = static_cast<SharedEntry*>(hash_seq_search(&scan))) {
            // Leases of a claim still under way (provisional tokens) are listed once it is done.
            if (e->key.database != MyDatabaseId || e->token <= kNoLease || out.size() == out.capacity()) continue;
            Listed l;
            l.source = static_cast<Source>(e->key.source);
            memcpy(l.id.data(), e->key.id, 16);
            l.consumer_hash = e->key.consumer_hash;
            l.lease = lease_of(e);
            out.push_back(l);
        }
        for (int p = kPartitions - 1; p >= 0; --p) LWLockRelease(&locks[p].lock);
    });
    return out;
}

TimestampTz earliest_expiry(std::optional<Source> source, std::optional<uint64_t> consumer_hash, TimestampTz after) {
    require_active();
    return pg_call([&] {
        TimestampTz earliest = PG_INT64_MAX;
        // A scan visits every bucket of the table, however few entries it holds.
        if (hash_get_num_entries(table) == 0) return earliest;
        for (int p = 0; p < kPartitions; ++p) LWLockAcquire(&locks[p].lock, LW_SHARED);
        HASH_SEQ_STATUS scan;
        hash_seq_init(&scan, table);
        while (SharedEntry* e = static_cast<SharedEntry*>(hash_seq_search(&scan))) {
            if (e->key.database != MyDatabaseId || e->token <= kNoLease || e->ending || e->expiry <= after) continue;
            if (source && e->key.source != static_cast<int32>(*source)) continue;
            if (consumer_hash && e->key.source == static_cast<int32>(Source::inbox) && e->key.consumer_hash != *consumer_hash)
                continue;
            earliest = std::min(earliest, e->expiry);
        }
        for (int p = kPartitions - 1; p >= 0; --p) LWLockRelease(&locks[p].lock);
        return earliest;
    });
}

void end_all(Source source) {
    require_active();
    const TransactionId xid = GetTopTransactionIdIfAny();
    pg_call([&] {
        for (int p = 0; p < kPartitions; ++p) LWLockAcquire(&locks[p].lock, LW_EXCLUSIVE);
        // Under the locks the count cannot grow: no allocation happens while they are held.
        pending.reserve(pending.size() + static_cast<std::size_t>(hash_get_num_entries(table)));
        HASH_SEQ_STATUS scan;
        hash_seq_init(&scan, table);
        while (SharedEntry* e = static_cast<SharedEntry*>(hash_seq_search(&scan))) {
            if (e->key.database != MyDatabaseId || e->key.source != static_cast<int32>(source) || e->ending) continue;
            mark_ending(e, xid, get_hash_value(table, &e->key));
        }
        for (int p = kPartitions - 1; p >= 0; --p) LWLockRelease(&locks[p].lock);
    });
}

Usage usage() {
    Usage u;
    if (!active) return u;
    u.max_leases = max_leases;
    u.in_use = pg_call([] { return static_cast<int64_t>(hash_get_num_entries(table)); });
    u.short_claims = static_cast<int64_t>(pg_atomic_read_u64(&control->short_claims));
    return u;
}

void count_short_claim() {
    if (active) pg_atomic_fetch_add_u64(&control->short_claims, 1);
}

}  // namespace shm
}  // namespace whizbang::pg
