// Which lease store runs (DESIGN §3.8): SQL-visible entry point.
#include "pg/lease/lease_store.h"

using namespace whizbang::pg;

// lease_store() RETURNS text: 'shared_memory' or 'table'.
WB_ROUTED_FUNCTION(wb_lease_store, local) {
    const char* name = shared_leases_active() ? "shared_memory" : "table";
    PG_RETURN_TEXT_P(pg_call([name] { return cstring_to_text(name); }));
}
