// seal_dedup_generations() and unseal_dedup_generation() (0.14.0, DESIGN §3.6 "Generations",
// dedup_filters.h): maintenance seals on its own; these are for operators, who must unseal a
// generation before writing into it with SQL (the seal's trigger refuses the write).
#include <string>

#include "pg/boundary/args.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/citus/shard_scope.h"
#include "pg/store/dedup_filters.h"
#include "pg/store/generations.h"

using namespace whizbang;
using namespace whizbang::pg;

namespace {

// Sealing and unsealing change what maintenance may drop and write: the caller needs what the
// maintenance capability gives (DELETE on the table), checked before anything runs as the owner.
void require_maintenance(const char* function) {
    pg_call([&] {
        Oid relid = whizbang_relid_unguarded(kDedupTable);
        if (pg_class_aclcheck(relid, GetUserId(), ACL_DELETE) == ACLCHECK_OK) return;
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("permission denied for table whizbang.%s", kDedupTable),
                        errdetail("%s changes a dedup generation as maintenance does: it needs DELETE on the table.",
                                  function),
                        errhint("Grant the maintenance capability: SELECT whizbang.grant_admin('<role>', "
                                "ARRAY['maintenance']).")));
    });
}

void require_generations(const char* function) {
    if (dedup_in_generations()) return;
    throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                   std::string(function) + ": whizbang.wh_message_deduplication is not in generations",
                   "A database with Citus keeps one dedup table (docs/scaleout.md); it has nothing to seal.",
                   "");
}

}  // namespace

// seal_dedup_generations(p_now timestamptz DEFAULT now()) RETURNS integer
WB_ROUTED_FUNCTION(wb_seal_dedup_generations, local) {
    const TimestampTz now = timestamptz_arg(fcinfo, 0, "p_now");
    require_maintenance("seal_dedup_generations");
    require_generations("seal_dedup_generations");
    SpiConnection spi;  // the settings are read through SPI
    const TimestampTz horizon = now - setting_int("dedup_retention_days") * USECS_PER_DAY;
    const int sealed = seal_generations(now, horizon, 0);
    spi.finish();
    return Int32GetDatum(sealed);
}

// unseal_dedup_generation(p_generation regclass) RETURNS boolean
WB_ROUTED_FUNCTION(wb_unseal_dedup_generation, local) {
    require_not_null(fcinfo, 0, "p_generation");
    const Oid relid = PG_GETARG_OID(0);
    require_maintenance("unseal_dedup_generation");
    require_generations("unseal_dedup_generation");
    bool found = false;
    for (const GenerationBound& g : list_generations()) found = found || g.relid == relid;
    if (!found) {
        const char* name = pg_call([&] { return get_rel_name(relid); });
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                       "p_generation " + std::string(name ? name : std::to_string(relid)) +
                           " is not a generation of whizbang.wh_message_deduplication",
                       "", "The generations are listed by SELECT generation FROM whizbang.dedup_generations.");
    }
    return BoolGetDatum(unseal_generation(relid));
}
