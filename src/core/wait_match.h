// Which waiting claims a committed transaction's new work wakes (claim_work's p_wait, issue 12).
//
// A waiting claim publishes what it can use (a WaitFilter); a committing transaction that
// stored or freed work publishes what it made claimable (a WorkSignal per source and consumer).
// plan_wakeups decides whom to wake: only waiters that can use the work, and no more of them
// than the rows need (50 waiters and one new row wake one), oldest waiter first.
#pragma once

#include <cstdint>
#include <vector>

#include "no_postgres.h"
#include "uuid.h"

namespace whizbang::core {

// A waiter that names more partitions than this is treated as one that may want any row, and a
// signal with more keys as one that may hold any partition: a few waiters woken for nothing, in
// exchange for a fixed-size record in shared memory.
constexpr int kWaitMaxPartitions = 32;
constexpr int kWaitMaxKeys = 32;
constexpr std::int64_t kNever = INT64_MAX;

struct WaitFilter {
    bool inbox = true, outbox = true;
    bool any_consumer = true;
    std::uint64_t consumer_hash = 0;  // inbox rows of this consumer only, unless any_consumer
    int partition_count = 0;          // 0: rows of every partition
    int npartitions = 0;              // > kWaitMaxPartitions: too many to keep (any partition)
    std::int32_t partitions[kWaitMaxPartitions] = {};
    int max_rows = 1;
};

struct WorkSignal {
    bool inbox = true;
    std::uint64_t consumer_hash = 0;  // inbox: the rows' consumer; outbox: unused
    std::int64_t rows_now = 0;        // rows claimable at once
    int nkeys = 0;                    // > kWaitMaxKeys: too many to keep (any partition)
    Uuid keys[kWaitMaxKeys] = {};     // partition keys (stream id, else message id) of those rows
    std::int64_t next_due = kNever;   // the earliest later due time of the other rows

    // Adds one row, claimable at `due` (at once when due <= now).
    void add(const Uuid& key, std::int64_t due, std::int64_t now);
    // Adds another signal of the same source and consumer.
    void merge(const WorkSignal& other);
};

enum class Match { no, yes, maybe };

// Whether a waiter with filter f can use the rows of s.
Match match(const WaitFilter& f, const WorkSignal& s);

struct WaiterView {
    WaitFilter filter;
    bool woken = false;          // already woken, not yet back from its retry
    std::uint64_t ticket = 0;    // smaller: waiting longer
    std::int64_t wake_at = kNever;  // when it wakes by itself at the latest
};

struct WakePlan {
    std::vector<std::size_t> wake;  // woken for rows claimable now
    // A waiter told of s.next_due (set its wake_at to it and its latch), or -1: a waiter that
    // can use those rows wakes by then anyway.
    long remind = -1;
};

// Whom signal s wakes among the waiters (indices into `waiters`).
WakePlan plan_wakeups(const std::vector<WaiterView>& waiters, const WorkSignal& s);

}  // namespace whizbang::core
