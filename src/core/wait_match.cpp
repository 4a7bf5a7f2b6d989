#include "wait_match.h"

#include <algorithm>
#include <numeric>

#include "partition.h"

namespace whizbang::core {

void WorkSignal::add(const Uuid& key, std::int64_t due, std::int64_t now) {
    if (due > now) {
        next_due = std::min(next_due, due);
        return;
    }
    ++rows_now;
    if (nkeys > kWaitMaxKeys) return;
    for (int i = 0; i < nkeys; ++i)
        if (keys[i] == key) return;
    if (nkeys == kWaitMaxKeys) nkeys = kWaitMaxKeys + 1;
    else keys[nkeys++] = key;
}

void WorkSignal::merge(const WorkSignal& other) {
    rows_now += other.rows_now;
    next_due = std::min(next_due, other.next_due);
    if (other.nkeys > kWaitMaxKeys) {
        nkeys = kWaitMaxKeys + 1;
        return;
    }
    for (int i = 0; i < other.nkeys && nkeys <= kWaitMaxKeys; ++i) {
        bool known = false;
        for (int j = 0; j < nkeys && !known; ++j) known = keys[j] == other.keys[i];
        if (known) continue;
        if (nkeys == kWaitMaxKeys) nkeys = kWaitMaxKeys + 1;
        else keys[nkeys++] = other.keys[i];
    }
}

Match match(const WaitFilter& f, const WorkSignal& s) {
    if (s.inbox ? !f.inbox : !f.outbox) return Match::no;
    // A consumer hash that collides wakes a waiter for nothing: harmless, it sleeps on.
    if (s.inbox && !f.any_consumer && f.consumer_hash != s.consumer_hash) return Match::no;
    if (f.partition_count < 1) return Match::yes;
    if (f.npartitions > kWaitMaxPartitions || s.nkeys > kWaitMaxKeys) return Match::maybe;
    for (int k = 0; k < s.nkeys; ++k) {
        const int p = partition_of(s.keys[k], f.partition_count);
        for (int i = 0; i < f.npartitions; ++i)
            if (f.partitions[i] == p) return Match::yes;
    }
    // No row claimable now is in its partitions; rows due later may be (their keys are not kept).
    return s.next_due != kNever ? Match::maybe : Match::no;
}

namespace {
// Whether a waiter (of the signal's source and consumer) can claim a row of partition key `key`.
bool takes_key(const WaitFilter& f, const Uuid& key) {
    if (f.partition_count < 1 || f.npartitions > kWaitMaxPartitions) return true;
    const int p = partition_of(key, f.partition_count);
    for (int i = 0; i < f.npartitions; ++i)
        if (f.partitions[i] == p) return true;
    return false;
}
}  // namespace

WakePlan plan_wakeups(const std::vector<WaiterView>& waiters, const WorkSignal& s) {
    std::vector<std::size_t> order(waiters.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return waiters[a].ticket < waiters[b].ticket; });
    std::vector<Match> matches(waiters.size());
    for (std::size_t i = 0; i < waiters.size(); ++i) matches[i] = match(waiters[i].filter, s);

    WakePlan plan;
    // Rows claimable now: sure matches first, then possible ones, each taking up to its
    // p_max_rows of them. A waiter already woken retries anyway and is not counted on: it may
    // have been woken for other rows.
    std::int64_t left = s.rows_now;
    for (Match want : {Match::yes, Match::maybe})
        for (std::size_t i : order) {
            if (left <= 0) break;
            if (matches[i] != want || waiters[i].woken) continue;
            plan.wake.push_back(i);
            left -= std::max(1, waiters[i].filter.max_rows);
        }
    auto waking = [&](std::size_t i) {
        return waiters[i].woken || std::find(plan.wake.begin(), plan.wake.end(), i) != plan.wake.end();
    };
    // Every row's partition needs a waking waiter that can take it: the count above may have
    // gone to waiters of other partitions (two rows, one each for two partitioned waiters).
    if (s.rows_now > 0 && s.nkeys <= kWaitMaxKeys)
        for (int k = 0; k < s.nkeys; ++k) {
            auto can_take = [&](std::size_t i) { return matches[i] != Match::no && takes_key(waiters[i].filter, s.keys[k]); };
            if (std::any_of(order.begin(), order.end(), [&](std::size_t i) { return waking(i) && can_take(i); })) continue;
            auto other = std::find_if(order.begin(), order.end(), [&](std::size_t i) { return !waking(i) && can_take(i); });
            if (other != order.end()) plan.wake.push_back(*other);
        }
    // Rows due later: a waiter that can use them must wake by then — one not woken now: a woken
    // one may take the rows claimable now and return, and nobody would remember the later time.
    if (s.next_due != kNever) {
        long first = -1;
        for (std::size_t i : order) {
            if (matches[i] == Match::no || waking(i)) continue;
            if (waiters[i].wake_at <= s.next_due) {
                first = -1;
                break;
            }
            if (first < 0) first = static_cast<long>(i);
        }
        plan.remind = first;
    }
    return plan;
}

}  // namespace whizbang::core
