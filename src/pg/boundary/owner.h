// Running a part of a call as the role that owns the extension, as a SECURITY DEFINER function
// would: for whizbang's own bookkeeping that the caller's grants must not decide (on a Citus
// install: the routing metadata, the routed parts, the settings; docs/scaleout.md "Grants").
#pragma once

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// For its life, the current user is the extension's owner (SECURITY_LOCAL_USERID_CHANGE, so
// SET ROLE inside is refused). The destructor restores the caller, also while an error unwinds
// the C++ side; a (sub)transaction abort would restore it too.
class AsExtensionOwner {
public:
    AsExtensionOwner();
    ~AsExtensionOwner();
    AsExtensionOwner(const AsExtensionOwner&) = delete;
    AsExtensionOwner& operator=(const AsExtensionOwner&) = delete;

private:
    Oid user_ = InvalidOid;
    int context_ = 0;
};

// Raises 42501 "permission denied for table whizbang.<table>" unless the current user (the
// caller: call it before AsExtensionOwner) holds `mode` on it. Routed work runs as the owner, so
// the coordinator checks here what the single server's statements would have checked.
void require_table_privilege(const char* table, AclMode mode);

// Whether the current user holds `mode` on whizbang.<table> (false when it does not exist).
bool has_table_privilege(const char* table, AclMode mode);

}  // namespace whizbang::pg
