// The partitions of the messages claims handed out, on a distributed install's coordinator
// (docs/scaleout.md "A node down is a node down"). An outcome call names rows by message id,
// which does not tell their node; a claim does (its partition_number column). With the partition
// of every id it names known, an outcome call goes to the nodes that hold them only, not to every
// node: a node that is down then stops only the calls for its messages.
//
// With whizbang in shared_preload_libraries the memory is shared by every backend of the server
// (`whizbang.remembered_claims` ids, per database), so a completion from another session than the
// claim's — a pool, a pooler, another worker process — is routed too; otherwise each backend
// remembers its own claims' last 65,536 ids.
// A row is named by source, consumer and message id (the same id delivered to two consumers may
// sit in two partitions), and its partition does not change while it lives (its shard's node
// may: routing follows Citus's metadata). An id forgotten (the memory is a cache: a new id may
// replace an older one of its set) only costs a call to every node.
#pragma once

#include <optional>
#include <string>

#include "core/uuid.h"
#include "pg/claim/work.h"

namespace whizbang::pg {

// Notes that the row (`source`, `consumer`, `id`), handed out by a claim, lives in `partition`
// (outbox rows: consumer ''). A new id may replace an older one; a forgotten id's outcome call
// goes to every node.
void remember_claimed(Source source, const std::string& consumer, const core::Uuid& id, int partition);

// The partition a claim noted for the row in this database, if any.
std::optional<int> claimed_partition(Source source, const std::string& consumer, const core::Uuid& id);

// The shared memory and its setting, from _PG_init when the postmaster preloads the library.
void claim_memory_preload_init();

}  // namespace whizbang::pg
