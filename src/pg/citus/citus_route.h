// The coordinator's side of a routed call (docs/scaleout.md; the node's side is shard_scope.h).
// A whizbang function called on a distributed install splits its work by shard and sends each
// part, as one router query, to the node that holds the shard: the same function runs there,
// next to the shard, inside the caller's transaction; Citus commits a transaction that wrote on
// several nodes with two-phase commit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// True when this call must be routed: the tables are Citus tables (distributed()) and the call
// is not itself a routed call's part running next to its shard (shard_scope.h).
bool must_route();

// The calling function's arguments as routed_call takes them: values, and 'n' for a NULL.
void caller_arguments(FunctionCallInfo fcinfo, std::vector<Datum>& values, std::vector<char>& nulls);

// Positions 0..n-1 grouped for routed calls: on the coordinator by the node (group id) that
// holds partitions[i]'s shard, on a node (in_node_scope) by the shard; in that order, so every
// call meets the nodes, and on each node the shards, in one order and two overlapping calls
// wait for each other at most. Needs an open SPI connection (one query to Citus's metadata).
std::map<int64_t, std::vector<std::size_t>> routing_groups(const std::vector<int>& partitions);

// One partition per routing group of the work tables' shards: on the coordinator one per node
// (its lowest partition), on a node one per shard the coordinator routed to it (a fan-out's node
// call carries them, set_pending_shard), else one per shard placed here. A call for each reaches
// every shard exactly once: routed_call hands each node its shards, and the node checks each
// under its lock (lock_local_placement), so a move in between is a retryable error. Cached until
// Citus's metadata of the work tables changes (distributed.h citus_metadata_generation).
std::vector<int> routing_anchors();

// Runs whizbang.<function>(args) on the node that holds `partition`'s shard, args[0] passed
// through whizbang._on_shard(partition, ...). nulls[i] == 'n' marks a NULL argument. The rows
// are left in SPI_tuptable (needs an open SPI connection); returns how many.
// `token`: the lease token the nodes hand out in this call (0: each node draws its own if it
// needs one, which only a claim or a pre-leasing store does).
// `row_partitions`: the partitions of the rows the call names, in argument order, handed to a
// node call (node_scope_partitions) so that it need not look them up.
// `shard_anchors`: a fan-out's node call visits these shards (one partition each) only; by
// default all the shards the coordinator routed to the node (node_shard_anchors).
uint64 routed_call(int partition, const char* function, const std::vector<Oid>& types,
                   const std::vector<Datum>& values, const std::vector<char>& nulls, int64_t token = 0,
                   const std::vector<int>* row_partitions = nullptr,
                   const std::vector<int>* shard_anchors = nullptr);

// On the coordinator: the shards (one partition each) of the node whose anchor is `node_anchor`
// (routing_anchors), as last routed.
std::vector<int> node_shard_anchors(int node_anchor);

// routed_call inside a subtransaction: when the node cannot be reached (Citus's connection
// failure, class 08) the subtransaction is rolled back and the answer is nullopt, so a call that
// visits every node can go on with the others (docs/scaleout.md "A node down"); any other error
// is raised. Nothing of the unreachable node's part was done.
std::optional<uint64> routed_call_if_reachable(int partition, const char* function, const std::vector<Oid>& types,
                                              const std::vector<Datum>& values, const std::vector<char>& nulls,
                                              int64_t token = 0);

// routed_call of a function that returns one integer (a count): that count (NULL: 0).
int routed_count(int partition, const char* function, const std::vector<Oid>& types,
                 const std::vector<Datum>& values, const std::vector<char>& nulls,
                 const std::vector<int>* row_partitions = nullptr);

// The lease token of a routed call: the one a node call was given, else a new one from this
// node's (the coordinator's) sequence.
int64_t coordinator_lease_token();

// The argument types of the calling function, for routed_call.
std::vector<Oid> argument_types(FunctionCallInfo fcinfo);

// The elements at `positions` (0-based) of a one-dimensional array, as a new array.
Datum slice_array(Datum array, const std::vector<std::size_t>& positions);

// A row of a routed call's answer, copied out of SPI, and the input position it answers.
constexpr int kMaxRoutedColumns = 16;
struct RoutedRow {
    std::size_t position = 0;
    Datum values[kMaxRoutedColumns] = {};
    bool nulls[kMaxRoutedColumns] = {};
};

// Row r of the last SPI result, as the columns of `desc`, copied into the caller's memory.
RoutedRow copy_routed_row(uint64 r, TupleDesc desc, std::size_t position);

// Puts `rows` into the caller's materialized result in position order (input order).
void put_in_order(ReturnSetInfo* rsinfo, std::vector<RoutedRow>& rows);

// Calls the calling whizbang `function`, with its own arguments, on every shard (routing_anchors)
// and returns all their rows, copied; position = the row's place in that order. Needs an open
// SPI connection.
std::vector<RoutedRow> call_on_every_shard(FunctionCallInfo fcinfo, const char* function);

// 22023 when `count` is more than a distributed install routes (kDistributedPartitionCount).
void require_distributed_partition_count(int count);

}  // namespace whizbang::pg
