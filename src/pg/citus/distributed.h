// Whether whizbang's tables were handed to Citus (whizbang.distribute(), DESIGN §3.9). On a
// distributed install the local heaps of those tables are empty shells: a C++ path that reads or
// writes them directly would lose data or answer from nothing, so every entry point routes its
// work to the nodes that hold the shards instead (citus_route.h, docs/scaleout.md).
#pragma once

namespace whizbang::pg {

// True when wh_inbox_work is a Citus table in this database. Cached per backend; a change of
// the table (distribute() re-keys it) or of the whole relcache drops the cached answer.
bool distributed();

}  // namespace whizbang::pg
