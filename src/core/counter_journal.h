// Throughput counts of one transaction (issue 33 item 6): what its calls stored, claimed,
// completed, failed and dead-lettered, per (source, consumer), kept until it ends. A
// subtransaction's counts join its parent's when it commits and are dropped when it aborts,
// so a committed transaction adds exactly what it did and an aborted one adds nothing.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "no_postgres.h"

namespace whizbang::core {

enum class Counter : std::uint8_t { stored = 0, claimed, completed, failed, dead_lettered };
constexpr std::size_t kCounters = 5;
// In Counter's order: the columns of whizbang.counters() and the names of stats()' totals.
constexpr const char* kCounterNames[kCounters] = {"stored", "claimed", "completed", "failed", "dead_lettered"};
using CounterValues = std::array<std::uint64_t, kCounters>;

// The counted key: 0 inbox, 1 outbox; the consumer ('' for the outbox).
using CounterKey = std::pair<int, std::string>;

class CounterJournal {
public:
    // `level`: the transaction nesting level of the counting call (1: the top transaction).
    void add(int source, const std::string& consumer, Counter counter, std::uint64_t n, int level);
    // The subtransaction at `level` committed: its counts are its parent's now.
    void commit_sub(int level);
    // The subtransaction at `level` aborted: its counts (and its children's) are gone.
    void abort_sub(int level);
    // The whole transaction's counts, summed per key; the journal is empty afterwards.
    std::map<CounterKey, CounterValues> take();
    void clear() { entries_.clear(); }
    bool empty() const { return entries_.empty(); }

private:
    struct Entry {
        int level;
        CounterKey key;
        CounterValues values;
    };
    std::vector<Entry> entries_;  // one per (level, key) at most
};

}  // namespace whizbang::core
