#include "pg/citus/distributed.h"

#include "pg/boundary/bridge.h"
#include "pg/citus/shard_scope.h"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
}

namespace whizbang::pg {
namespace {

bool known = false;
bool answer = false;
bool registered = false;
Oid work_relid = InvalidOid;
unsigned long generation = 1;

void on_invalidation(Datum, Oid relid) {
    if (relid == InvalidOid || relid == work_relid) {
        known = false;
        ++generation;
    }
}

// Reads pg_dist_partition (Citus's catalog of distributed tables) directly: no SPI, so the
// check can run before a function opens its SPI connection.
bool work_table_is_citus_table() {
    if (!OidIsValid(get_extension_oid("citus", true))) return false;
    Oid catalog = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
    if (!OidIsValid(catalog) || !OidIsValid(work_relid)) return false;
    Relation rel = table_open(catalog, AccessShareLock);
    ScanKeyData key;
    // logicalrelid is the catalog's first column.
    ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(work_relid));
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, nullptr, 1, &key);
    bool found = HeapTupleIsValid(systable_getnext(scan));
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return found;
}

}  // namespace

bool distributed() {
    pg_call([&] {
        if (!registered) {
            CacheRegisterRelcacheCallback(on_invalidation, PointerGetDatum(nullptr));
            registered = true;
        }
        AcceptInvalidationMessages();
        if (!known) {
            Oid ns = get_namespace_oid("whizbang", true);
            work_relid = OidIsValid(ns) ? get_relname_relid("wh_inbox", ns) : InvalidOid;
            answer = work_table_is_citus_table();
            known = true;
        }
    });
    return answer;
}

unsigned long citus_metadata_generation() { return generation; }

void forget_citus_routing() { ++generation; }

bool placed_here(const char* table) {
    // The table's shards placed in this node's group: local_shards (shard_scope.h).
    return !local_shards(table).empty();
}

}  // namespace whizbang::pg
