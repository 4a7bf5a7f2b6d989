// The partitions of the messages this backend's claims handed out, on a distributed install's
// coordinator (docs/scaleout.md "A node down is a node down"). An outcome call names rows by
// message id, which does not tell their node; a claim does (its partition_number column). With
// the partition of every id it names known, an outcome call goes to the nodes that hold them
// only, not to every node: a node that is down then stops only the calls for its messages.
// A message's partition never changes (its shard's node may: routing follows Citus's metadata).
#pragma once

#include <optional>

#include "core/uuid.h"
#include "pg/claim/work.h"

namespace whizbang::pg {

// Notes that `id` of `source`, handed out by a claim, lives in `partition`. At most 65,536 are
// kept (the oldest forgotten first); a forgotten id's outcome call goes to every node, as before.
void remember_claimed(Source source, const core::Uuid& id, int partition);

// The partition a claim of this backend noted for `id`, if any.
std::optional<int> claimed_partition(Source source, const core::Uuid& id);

}  // namespace whizbang::pg
