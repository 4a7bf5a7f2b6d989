// The work counts of each (source, consumer), shared by queues() and stats() so that stats()'
// per-source figures are the sums of queues()' rows by construction.
#pragma once

#include <string>

namespace whizbang::pg {

// A statement (its only parameter, $1, is `now`) returning one row per (source, consumer) that
// has unprocessed work or dead letters: source, consumer (NULL for the outbox), pending, leased,
// scheduled, dead_lettered, oldest_pending_seconds, ordered by source and consumer.
std::string queue_counts_sql();

}  // namespace whizbang::pg
