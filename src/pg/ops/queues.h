// The work counts of each (source, consumer), shared by queues() and stats() so that stats()'
// per-source figures are the sums of queues()' rows by construction.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// A statement (parameters: queue_counts_params(), $1 is `now`, then the shared leases)
// returning one row per (source, consumer) that
// has unprocessed work or dead letters: source, consumer (NULL for the outbox), pending, leased,
// scheduled, dead_lettered, oldest_pending_seconds, ordered by source and consumer.
std::string queue_counts_sql();
std::vector<Oid> queue_counts_types();
std::vector<Datum> queue_counts_params(TimestampTz now);

// queues(now) on a distributed install: every shard's counts (its node runs queues() next to
// it), added up per source and consumer (the oldest message: the largest age), in queues()'
// order. Needs an open SPI connection.
struct QueueCounts {
    std::string source;
    std::optional<std::string> consumer;
    int64_t pending = 0, leased = 0, scheduled = 0, dead_lettered = 0, oldest_pending_seconds = 0;
};
// `unreachable`: when given, a node that cannot be reached is counted there and skipped (stats());
// without it, its connection error is raised.
std::vector<QueueCounts> routed_queue_counts(TimestampTz now, int* unreachable = nullptr);

}  // namespace whizbang::pg
