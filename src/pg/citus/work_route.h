// The work-outcome calls on a distributed install (docs/scaleout.md): complete_work,
// fail_work, renew_leases, release_work, cancel_work and complete_outbox_published name rows by
// message id, and a message's node follows from its partition, which the id alone does not
// give (a streamed message lives in its stream's). So the coordinator sends the whole call to
// every node (citus_route.h); a node looks the ids up in its own shards (one local statement)
// and runs each shard's ids — with the elements of every array argument that belong to them —
// there; the coordinator keeps, per id, the answer of the node that has the row. A dead
// letter's retry is routed by a look-up of its partition on the coordinator.
#pragma once

#include <string>
#include <vector>

#include "core/uuid.h"
#include "pg/claim/work.h"

namespace whizbang::pg {

// complete_work, fail_work, renew_leases, release_work, cancel_work: argument 1 is the ids;
// fills the caller's materialized result with one row per id, in input order.
void route_outcomes(FunctionCallInfo fcinfo, const char* function, Source source, const std::vector<core::Uuid>& ids,
                    const std::string& consumer);

// complete_outbox_published(p_ids, p_debug_mode): the sum of the nodes' counts.
int route_published(FunctionCallInfo fcinfo, const std::vector<core::Uuid>& ids);

// retry_dead_letters(p_dead_letter_ids): each dead letter goes back on the node that holds it
// (its message's partition); the sum of the nodes' counts.
int route_dead_letter_retry(FunctionCallInfo fcinfo, const std::vector<int64_t>& ids);

}  // namespace whizbang::pg
