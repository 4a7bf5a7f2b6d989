#include "pg/boundary/owner.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "catalog/namespace.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/fmgroids.h"
}

namespace whizbang::pg {
namespace {

// pg_extension.extowner of whizbang. Read each time: a catalog index probe, and ALTER EXTENSION
// ... OWNER needs no cache invalidation then.
Oid extension_owner_unguarded() {
    Oid extension = get_extension_oid("whizbang", false);
    Relation rel = table_open(ExtensionRelationId, AccessShareLock);
    ScanKeyData key;
    ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(extension));
    SysScanDesc scan = systable_beginscan(rel, ExtensionOidIndexId, true, nullptr, 1, &key);
    HeapTuple tuple = systable_getnext(scan);
    if (!HeapTupleIsValid(tuple)) elog(ERROR, "whizbang: extension whizbang not found");
    Oid owner = reinterpret_cast<Form_pg_extension>(GETSTRUCT(tuple))->extowner;
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return owner;
}

}  // namespace

AsExtensionOwner::AsExtensionOwner() {
    pg_call([&] {
        GetUserIdAndSecContext(&user_, &context_);
        SetUserIdAndSecContext(extension_owner_unguarded(), context_ | SECURITY_LOCAL_USERID_CHANGE);
    });
}

bool has_table_privilege(const char* table, AclMode mode) {
    return pg_call([&] {
        Oid relid = get_relname_relid(table, get_namespace_oid("whizbang", false));
        return OidIsValid(relid) && pg_class_aclcheck(relid, GetUserId(), mode) == ACLCHECK_OK;
    });
}

void require_table_privilege(const char* table, AclMode mode) {
    pg_call([&] {
        Oid relid = get_relname_relid(table, get_namespace_oid("whizbang", false));
        if (!OidIsValid(relid)) return;
        AclResult result = pg_class_aclcheck(relid, GetUserId(), mode);
        if (result != ACLCHECK_OK) aclcheck_error(result, OBJECT_TABLE, psprintf("whizbang.%s", table));
    });
}

AsExtensionOwner::~AsExtensionOwner() { SetUserIdAndSecContext(user_, context_); }

}  // namespace whizbang::pg
