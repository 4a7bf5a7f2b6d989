// Backend-local caches of whizbang's small configuration tables (wh_settings,
// wh_idempotency_policies). Each table has a statement trigger that sends a relcache
// invalidation (whizbang._table_changed), so a cache is dropped exactly when a change to its
// table commits — or, in the writing transaction itself, at its next command.
#pragma once

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

class TableCache {
public:
    // `relname` is a table in schema whizbang; `reset` empties the cached data.
    TableCache(const char* relname, void (*reset)());
    // True when the cached data may be used; false means: reload, then call mark_loaded().
    bool fresh();
    // Under REPEATABLE READ / SERIALIZABLE the data was read with the transaction's snapshot,
    // which may predate a committed change: such a load serves this call only.
    void mark_loaded();

private:
    static void on_invalidation(Datum arg, Oid relid);
    const char* relname_;
    void (*reset_)();
    Oid relid_ = InvalidOid;
    bool fresh_ = false;
    bool registered_ = false;
};

}  // namespace whizbang::pg
