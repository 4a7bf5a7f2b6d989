#include "pg/citus/claim_memory.h"

#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <utility>

extern "C" {
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"
}

namespace whizbang::pg {
namespace {

// ---- one backend's own memory (the library not preloaded) --------------------------------------

constexpr std::size_t kRemembered = 65536;

using Key = std::tuple<int, std::string, core::Uuid>;
std::map<Key, int> local_partitions;
std::deque<Key> local_order;  // oldest first, to forget

// ---- the server's shared memory --------------------------------------------------------------
// A set-associative cache: an id hashes to one bucket of kWays entries, and a new id replaces
// the bucket's oldest. Buckets are guarded by striped locks; nothing under a lock can fail.

constexpr const char* kTranche = "whizbang_claim_memory";
constexpr int kWays = 4;
constexpr int kLocks = 64;

struct Entry {
    Oid database;  // InvalidOid: empty
    int32 partition;
    uint8 source;
    uint64 consumer;  // a hash of the consumer: two consumers' rows of one id differ in it
    uint8 id[16];
};

struct Bucket {
    uint32 next;  // the way a new id takes (round robin: the oldest)
    Entry ways[kWays];
};

int remembered_claims = 131072;  // whizbang.remembered_claims
bool active = false;
Bucket* buckets = nullptr;
uint32 nbuckets = 0;
LWLockPadded* locks = nullptr;
shmem_request_hook_type prev_request = nullptr;
shmem_startup_hook_type prev_startup = nullptr;

uint32 bucket_count() {
    // A power of two, so that a hash picks a bucket with a mask.
    uint32 n = 1;
    while (n * kWays < static_cast<uint32>(remembered_claims)) n <<= 1;
    return remembered_claims > 0 ? n : 0;
}

Size shared_size() { return mul_size(sizeof(Bucket), bucket_count()); }

void request_shmem() {
    if (prev_request) prev_request();
    RequestAddinShmemSpace(shared_size());
    RequestNamedLWLockTranche(kTranche, kLocks);
}

void startup_shmem() {
    if (prev_startup) prev_startup();
    nbuckets = bucket_count();
    if (nbuckets == 0) return;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    bool found = false;
    buckets = static_cast<Bucket*>(ShmemInitStruct("whizbang claim memory", shared_size(), &found));
    if (!found) memset(static_cast<void*>(buckets), 0, shared_size());
    LWLockRelease(AddinShmemInitLock);
    locks = GetNamedLWLockTranche(kTranche);
}

bool shared_on() { return active && buckets != nullptr && nbuckets > 0; }

uint64 consumer_hash(const std::string& consumer) {
    return hash_bytes_extended(reinterpret_cast<const unsigned char*>(consumer.data()), static_cast<int>(consumer.size()),
                               0);
}

uint32 bucket_of(uint8 source, uint64 consumer, const core::Uuid& id) {
    uint32 h = hash_bytes(id.data(), static_cast<int>(id.size()));
    h = hash_combine(h, hash_bytes_uint32(MyDatabaseId));
    h = hash_combine(h, static_cast<uint32>(consumer ^ (consumer >> 32)));
    return hash_combine(h, source) & (nbuckets - 1);
}

// A 64-bit hash of the consumer: two consumers' rows of one id are told apart but for a
// collision of 2^-64, which would send an outcome call to the other row's node (not_found).
bool same(const Entry& e, uint8 source, uint64 consumer, const core::Uuid& id) {
    return e.database == MyDatabaseId && e.source == source && e.consumer == consumer &&
           memcmp(e.id, id.data(), sizeof(e.id)) == 0;
}

}  // namespace

void remember_claimed(Source source, const std::string& consumer, const core::Uuid& id, int partition) {
    const uint8 s = static_cast<uint8>(source);
    if (shared_on()) {
        const uint64 c = consumer_hash(consumer);
        const uint32 b = bucket_of(s, c, id);
        LWLock* lock = &locks[b % kLocks].lock;
        LWLockAcquire(lock, LW_EXCLUSIVE);
        Bucket& bucket = buckets[b];
        Entry* slot = nullptr;
        for (Entry& e : bucket.ways)
            if (same(e, s, c, id)) slot = &e;
        if (slot == nullptr) {
            slot = &bucket.ways[bucket.next];
            bucket.next = (bucket.next + 1) % kWays;
            slot->database = MyDatabaseId;
            slot->source = s;
            slot->consumer = c;
            memcpy(slot->id, id.data(), sizeof(slot->id));
        }
        slot->partition = partition;
        LWLockRelease(lock);
        return;
    }
    Key key{s, consumer, id};
    auto [it, added] = local_partitions.insert_or_assign(key, partition);
    (void)it;
    if (!added) return;
    local_order.push_back(key);
    while (local_order.size() > kRemembered) {
        local_partitions.erase(local_order.front());
        local_order.pop_front();
    }
}

std::optional<int> claimed_partition(Source source, const std::string& consumer, const core::Uuid& id) {
    const uint8 s = static_cast<uint8>(source);
    if (shared_on()) {
        const uint64 c = consumer_hash(consumer);
        const uint32 b = bucket_of(s, c, id);
        LWLock* lock = &locks[b % kLocks].lock;
        std::optional<int> partition;
        LWLockAcquire(lock, LW_SHARED);
        for (const Entry& e : buckets[b].ways)
            if (same(e, s, c, id)) partition = e.partition;
        LWLockRelease(lock);
        return partition;
    }
    auto it = local_partitions.find(Key{s, consumer, id});
    if (it == local_partitions.end()) return std::nullopt;
    return it->second;
}

void claim_memory_preload_init() {
    DefineCustomIntVariable("whizbang.remembered_claims",
                            "Claimed message ids whose partition the server remembers, so that an outcome call from any "
                            "session reaches only the Citus nodes holding its messages (0: each session remembers its "
                            "own claims).",
                            nullptr, &remembered_claims, 131072, 0, 16777216, PGC_POSTMASTER, 0, nullptr, nullptr,
                            nullptr);
    prev_request = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_startup = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
    active = true;
}

}  // namespace whizbang::pg
