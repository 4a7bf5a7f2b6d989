#include "pg/ops/counters.h"

#include <cstring>
#include <map>

#include "pg/boundary/args.h"
#include "pg/claim/work.h"

extern "C" {
#include "common/hashfn.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
}

namespace whizbang::pg {
namespace {

constexpr const char* kTranche = "whizbang_counters";
constexpr std::size_t kMaxConsumerBytes = 1024;  // the consumer limit of every call
// Room beyond the setting for the "other consumers" rows of a full table (one per database and
// source that overflowed).
constexpr long kOverflowRoom = 64;

struct SharedKey {
    Oid database;
    uint32 source;     // 0 inbox, 1 outbox
    uint64 consumer;   // hash of the name; 0 with `other`
    uint32 other;      // 1: the consumers that found the table full
};

struct SharedEntry {
    SharedKey key;  // first: the hash table's key
    uint64 values[core::kCounters];
    uint32 name_length;
    char name[kMaxConsumerBytes];
};

int max_consumers = 1000;
bool active = false;
HTAB* table = nullptr;
LWLock* lock = nullptr;
long* named = nullptr;  // entries of named consumers, at most max_consumers; under the lock
shmem_request_hook_type prev_request = nullptr;
shmem_startup_hook_type prev_startup = nullptr;

long capacity() { return max_consumers + kOverflowRoom; }

void request_shmem() {
    if (prev_request) prev_request();
    RequestAddinShmemSpace(add_size(MAXALIGN(sizeof(long)), hash_estimate_size(capacity(), sizeof(SharedEntry))));
    RequestNamedLWLockTranche(kTranche, 1);
}

void startup_shmem() {
    if (prev_startup) prev_startup();
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    named = static_cast<long*>(ShmemInitStruct("whizbang counters control", sizeof(long), &found));
    if (!found) *named = 0;
    HASHCTL info;
    memset(&info, 0, sizeof(info));
    info.keysize = sizeof(SharedKey);
    info.entrysize = sizeof(SharedEntry);
    table = ShmemInitHash("whizbang counters", capacity(), capacity(), &info, HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);
    LWLockRelease(AddinShmemInitLock);
    lock = &GetNamedLWLockTranche(kTranche)->lock;
}

core::CounterJournal journal;

SharedKey key_of(const core::CounterKey& k, bool other) {
    SharedKey key;
    memset(&key, 0, sizeof(key));  // HASH_BLOBS compares the padding too
    key.database = MyDatabaseId;
    key.source = static_cast<uint32>(k.first);
    key.consumer = other ? 0
                         : hash_bytes_extended(reinterpret_cast<const unsigned char*>(k.second.data()),
                                               static_cast<int>(k.second.size()), 0);
    key.other = other ? 1 : 0;
    return key;
}

// The entry of `k`, made if need be; a consumer whose hash is another's, or that finds the table
// full, is counted in its database's and source's "other consumers" row. Under the exclusive lock.
SharedEntry* entry_for(const core::CounterKey& k) {
    SharedKey key = key_of(k, false);
    bool found = false;
    auto* e = static_cast<SharedEntry*>(hash_search(table, &key, HASH_FIND, &found));
    const std::size_t length = std::min(k.second.size(), kMaxConsumerBytes);
    if (!e && *named < max_consumers) {
        e = static_cast<SharedEntry*>(hash_search(table, &key, HASH_ENTER_NULL, &found));
        if (e) {
            ++*named;
            memset(e->values, 0, sizeof(e->values));
            e->name_length = static_cast<uint32>(length);
            memcpy(e->name, k.second.data(), length);
            return e;
        }
    }
    if (e && e->name_length == length && memcmp(e->name, k.second.data(), length) == 0) return e;
    key = key_of(k, true);
    e = static_cast<SharedEntry*>(hash_search(table, &key, HASH_ENTER_NULL, &found));
    if (e && !found) {
        memset(e->values, 0, sizeof(e->values));
        e->name_length = 0;
    }
    return e;  // NULL: not even room for that row; the counts are lost (never an error at commit)
}

void flush() {
    if (journal.empty()) return;
    std::map<core::CounterKey, core::CounterValues> sums;
    try {
        sums = journal.take();
    } catch (...) {
        journal.clear();
        return;
    }
    LWLockAcquire(lock, LW_EXCLUSIVE);
    for (const auto& [k, values] : sums) {
        SharedEntry* e = entry_for(k);
        if (!e) continue;
        for (std::size_t c = 0; c < core::kCounters; ++c) e->values[c] += values[c];
    }
    LWLockRelease(lock);
}

}  // namespace

void counters_preload_init() {
    DefineCustomIntVariable("whizbang.max_counted_consumers",
                            "Consumers per server whose throughput is counted apart (counters()); beyond it, a "
                            "database's further consumers are counted together.",
                            nullptr, &max_consumers, 1000, 10, 1000000, PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
    prev_request = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_startup = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
    active = true;
}

bool counters_active() { return active; }

void count(Source source, const std::string& consumer, core::Counter counter, uint64_t n) noexcept {
    if (!active || n == 0) return;
    try {
        journal.add(static_cast<int>(source), consumer, counter, n, GetCurrentTransactionNestLevel());
    } catch (...) {
        // Out of memory for a count: the count is lost, the call goes on.
    }
}

void counters_at_xact(XactEvent event) {
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PREPARE:
            // A prepared transaction's counts are added when it is prepared: whichever way it
            // ends later, no backend of it is left to add them then.
            if (active) flush();
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            journal.clear();
            break;
        default:
            break;
    }
}

void counters_at_subxact(SubXactEvent event) {
    if (!active || journal.empty()) return;
    const int level = GetCurrentTransactionNestLevel();
    try {
        if (event == SUBXACT_EVENT_COMMIT_SUB) journal.commit_sub(level);
        else if (event == SUBXACT_EVENT_ABORT_SUB) journal.abort_sub(level);
    } catch (...) {
        journal.clear();
    }
}

}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// _counters() RETURNS TABLE(source text, consumer text, stored bigint, claimed bigint,
// completed bigint, failed bigint, dead_lettered bigint): this server's counts for this
// database; consumer NULL is the "other consumers" row of a full table. No rows without the
// preload.
WB_ROUTED_FUNCTION(wb_counters, local) {
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (!active) return (Datum)0;
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_call([&] {
        LWLockAcquire(lock, LW_SHARED);
        HASH_SEQ_STATUS scan;
        hash_seq_init(&scan, table);
        for (auto* e = static_cast<SharedEntry*>(hash_seq_search(&scan)); e;
             e = static_cast<SharedEntry*>(hash_seq_search(&scan))) {
            if (e->key.database != MyDatabaseId) continue;
            Datum values[7];
            bool nulls[7] = {false, e->key.other != 0, false, false, false, false, false};
            values[0] = PointerGetDatum(cstring_to_text(e->key.source == 0 ? "inbox" : "outbox"));
            values[1] = e->key.other ? (Datum)0 : PointerGetDatum(cstring_to_text_with_len(e->name, static_cast<int>(e->name_length)));
            for (std::size_t c = 0; c < core::kCounters; ++c) values[2 + c] = Int64GetDatum(static_cast<int64>(e->values[c]));
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
        LWLockRelease(lock);
    });
    return (Datum)0;
}
