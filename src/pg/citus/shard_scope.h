// A routed call on a Citus node (docs/scaleout.md, citus_route.h). The coordinator sends each
// part of a call to the node that holds the part's shard as one router query, which calls the
// same whizbang function there with its first argument passed through whizbang._on_shard(
// partition, value). That call then runs in the shard scope of the partition: whizbang's SQL
// and its direct heap and index access name the node's local shards of the partition
// (wh_inbox_102008, ...), never the tables' shells, which hold no rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// The partitions a distributed install routes (0 to 9999, wh_partitions): the default
// partition count (DESIGN §3.4), and the count of dedup records stored without a stream.
constexpr int kDistributedPartitionCount = 10000;

// True inside a routed call on the node that holds its shard.
bool in_shard_scope();

// Names the shards of the current shard scope (empty outside one): statements prepared for one
// scope serve every call with the same key (spi.cpp keeps one plan per statement and key).
const std::string& shard_scope_key();

// True inside a routed call for a whole node: the coordinator sent the node every part of a
// call whose shards it holds, in one call; the node splits it by shard and runs each part
// locally (citus_route.h), so a call costs one round trip per node, not per shard.
bool in_node_scope();

// The lease token the coordinator drew for the routed call (a claim, a pre-leasing store): every
// node of one call hands out the same, from the coordinator's sequence. 0: none.
int64_t shard_scope_token();

// `sql` with every whizbang.<distributed or reference table> renamed to its local shard, the
// ON CONFLICT targets of the single-server keys extended by the distribution column, and every
// /*+SHARD text*/ comment turned into its text (the distribution column: a statement names it
// so, and a single server, whose tables may predate it, never sees it).
std::string shard_sql(const std::string& sql);

// The relation whizbang.<name> (a table or one of its indexes): the local shard's inside a
// routed call, the table's own outside one. InvalidOid when there is none.
Oid whizbang_relid(const char* name);
// The same for code on the PostgreSQL side of the boundary (inside pg_call): raises a
// PostgreSQL error, never a C++ exception.
Oid whizbang_relid_unguarded(const char* name);

// whizbang._on_shard(partition, value): the next whizbang function called in this transaction
// runs in the shard scope of `partition`.
// `partitions`: a node call's partitions of the rows it names, in argument order (the
// coordinator looked them up), so the node can split the call without a distributed query.
// `shard_anchors`: a fan-out node call's shards as the coordinator routed them, one partition
// each (citus_route.h routing_anchors): the node visits exactly these, each under its lock and
// placement check, never its own list, so a shard that moved between the coordinator's routing
// and the node's work is an error (40001), never a shard visited twice or not at all.
void set_pending_shard(int partition, int64_t token, bool node, std::vector<int> partitions,
                       std::vector<int> shard_anchors = {});

// A fan-out node call's shards (see set_pending_shard); empty if none were given.
const std::vector<int>& node_scope_shard_anchors();

// A node call's partitions of the rows it names (see set_pending_shard); empty if none given.
const std::vector<int>& node_scope_partitions();

// The shard ids of whizbang.<table> placed on this node, ascending (Citus's metadata).
std::vector<int64_t> local_shards(const char* table);

// The shard ids of whizbang.<table> that hold `partitions`, in their order (Citus's metadata).
std::vector<int64_t> shards_of_partitions(const std::vector<int>& partitions, const char* table = "wh_inbox");

// The shards of wh_idempotency_keys (a colocation group of its own) placed on this node, when
// the current routed call is for this node's first shard of the work tables; else none. Lets
// a per-shard fan-out (perform_maintenance) visit each node's keys exactly once.
std::vector<int64_t> idempotency_shards_of_first_local_shard();

// Citus's metadata locks of `shards` (ascending), share mode, till the end of the transaction,
// here: the coordinator's side of a routed call takes them before it routes, as Citus's own
// writes lock their shards on the coordinator before they reach the nodes. Needs the rights of
// the tables' owner (AsExtensionOwner).
void lock_shards_here(const std::vector<int64_t>& shards);

// Takes Citus's metadata lock of `shard` as Citus's own writes do (share mode, till the end of
// the transaction), so a move, split or rebalance of its colocation group waits for this
// transaction, or this call for the operation; then, under the lock, checks the latest committed
// metadata: the shard must be placed on this node, else 40001 (retryable; nothing written) and
// the routing cached in this backend is dropped. `partition`: for the message (-1: none).
void lock_local_placement(int64_t shard, int partition);

// Names `table` by `shard` too, after lock_local_placement(shard), for the life of this object (inside a routed call).
class ShardTableOverride {
public:
    ShardTableOverride(const char* table, int64_t shard);
    ~ShardTableOverride();
    ShardTableOverride(const ShardTableOverride&) = delete;
    ShardTableOverride& operator=(const ShardTableOverride&) = delete;
};

// The entry hooks of every whizbang function (bridge.h EntryHooks, installed by module.cpp):
// enter takes the partition whizbang._on_shard() left for this call and makes the shard scope of
// that partition current (true), or does nothing (false); leave ends the scope entered.
bool enter_shard_scope();
void leave_shard_scope();

// The end of a transaction (module.cpp's dispatcher): a routed call's pending shard is forgotten.
void shard_scope_at_xact(XactEvent event);

}  // namespace whizbang::pg
