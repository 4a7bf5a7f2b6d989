// Whether whizbang's tables were handed to Citus (whizbang.distribute(), DESIGN §3.9). On a
// distributed install the local heaps of those tables are empty shells: a C++ path that reads or
// writes them directly would lose data or answer from nothing, so every entry point routes its
// work to the nodes that hold the shards instead (citus_route.h, docs/scaleout.md).
#pragma once

namespace whizbang::pg {

// True when wh_inbox is a Citus table in this database. Cached per backend; a change of
// the table (distribute() re-keys it) or of the whole relcache drops the cached answer.
bool distributed();

// A number that changes whenever Citus's metadata of whizbang's tables may have changed in a way
// this backend has seen: Citus invalidates a distributed table's relcache entry when its shards
// or placements change (a move, a split, a rebalance, a node added or removed), and so does a
// full relcache reset. Routing cached under one number is stale under another (citus_route.h).
// Read after distributed(), which takes the pending invalidations in.
unsigned long citus_metadata_generation();

// Whether this node holds a placement of whizbang.<table> (a reference table: every node in
// Citus's metadata does, the coordinator once citus_set_coordinator_host ran). Reads the catalog.
bool placed_here(const char* table);

// Marks every routing cached in this backend as stale (a routed part found its shard gone).
void forget_citus_routing();

}  // namespace whizbang::pg
