// Throughput counters per source and consumer (0.16.0, issue 33 item 6): messages stored,
// claimed, completed, failed and dead-lettered since the server started, monotonic, for
// monitoring to rate. Kept in shared memory, so with shared_preload_libraries = 'whizbang' only;
// without it nothing is counted (counters() has no rows, stats() says counters_active 0). A
// transaction's counts are added when it commits (or is prepared): a rolled-back call counts
// nothing (core/counter_journal.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/counter_journal.h"
#include "pg/boundary/bridge.h"

namespace whizbang::pg {

enum class Source;

// _PG_init while preloading: the setting whizbang.max_counted_consumers and the shared table.
void counters_preload_init();
bool counters_active();

// Adds n to this transaction's count (nothing without the preload). Never throws.
void count(Source source, const std::string& consumer, core::Counter counter, uint64_t n) noexcept;

// Counts n rows whose consumers consumer_of(0 .. n-1) gives: one count per run of equal
// consumers (the rows of one call are mostly one consumer's).
template <typename ConsumerOf>
void count_rows(Source source, core::Counter counter, std::size_t n, ConsumerOf consumer_of) {
    if (!counters_active()) return;
    std::size_t run = 0;
    std::string current;
    for (std::size_t i = 0; i < n; ++i) {
        std::string next = consumer_of(i);
        if (run > 0 && next != current) {
            count(source, current, counter, run);
            run = 0;
        }
        current = std::move(next);
        ++run;
    }
    if (run > 0) count(source, current, counter, run);
}

// The ends of transactions and subtransactions (module.cpp's dispatcher).
void counters_at_xact(XactEvent event);
void counters_at_subxact(SubXactEvent event);

}  // namespace whizbang::pg
