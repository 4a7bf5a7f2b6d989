#include "pg/boundary/table_cache.h"

#include "pg/citus/distributed.h"

namespace whizbang::pg {

TableCache::TableCache(const char* relname, void (*reset)()) : relname_(relname), reset_(reset) {}

void TableCache::on_invalidation(Datum arg, Oid relid) {
    auto* self = reinterpret_cast<TableCache*>(DatumGetPointer(arg));
    // InvalidOid: the whole relcache was reset (e.g. after a sinval overflow).
    if (relid == InvalidOid || relid == self->relid_) {
        self->fresh_ = false;
        self->relid_ = InvalidOid;  // a dropped and re-created extension has new OIDs
        self->reset_();
    }
}

void TableCache::mark_loaded() {
    // On a Citus install only where this node holds a placement of the (reference) table: the
    // change invalidates the caches of the nodes whose placement it writes (_table_changed).
    fresh_ = !IsolationUsesXactSnapshot() && (!distributed() || placed_here(relname_));
}

bool TableCache::fresh() {
    pg_call([&] {
        if (!registered_) {
            CacheRegisterRelcacheCallback(on_invalidation, PointerGetDatum(this));
            registered_ = true;
        }
        AcceptInvalidationMessages();  // see changes committed since our last lock
        if (relid_ == InvalidOid) {
            relid_ = get_relname_relid(relname_, get_namespace_oid("whizbang", false));
            fresh_ = false;
        }
    });
    if (!fresh_) reset_();
    return fresh_;
}

}  // namespace whizbang::pg
