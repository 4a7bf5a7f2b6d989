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

}  // namespace whizbang::pg
