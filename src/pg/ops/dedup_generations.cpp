// dedup_generations() (DESIGN §3.6 "Generations", docs/operations.md): one row per generation
// of whizbang.wh_message_deduplication, oldest first, with its records counted now. A table
// that is not in generations (a distributed install, docs/scaleout.md) has none.
#include <map>
#include <string>

#include "pg/boundary/arrays.h"
#include "pg/citus/citus_route.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/store/generations.h"
#include "pg/boundary/required_privileges.h"

using namespace whizbang;
using namespace whizbang::pg;

// dedup_generations() RETURNS TABLE(generation text, starts_at timestamptz, ends_at timestamptz,
//   records bigint, leaves_window_at timestamptz)
WB_ROUTED_FUNCTION(wb_dedup_generations, local) {
    require_privileges("dedup_generations");
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (!dedup_in_generations()) return (Datum)0;
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    SpiConnection spi;
    const int64 retention = setting_int("dedup_retention_days") * USECS_PER_DAY;
    // Counted through the parent, one scan of all, by generation (tableoid): the caller's SELECT
    // on wh_message_deduplication is all it needs (grant_admin's monitor grants nothing on the
    // generations, which maintenance makes and drops).
    static whizbang::pg::CachedPlan counts_plan("SELECT d.tableoid, pg_catalog.count(*) FROM whizbang.wh_message_deduplication d"
                                  " GROUP BY d.tableoid",
                                  {});
    std::map<Oid, int64> counted;
    const uint64 groups = counts_plan.execute({});
    for (uint64 r = 0; r < groups; ++r) {
        bool isnull = false;
        const Oid relid = DatumGetObjectId(spi_value(r, 1, &isnull));
        counted[relid] = DatumGetInt64(spi_value(r, 2, &isnull));
    }
    for (const GenerationBound& g : list_generations()) {
        const char* relname = pg_call([&] { return get_rel_name(g.relid); });
        if (relname == nullptr) continue;  // dropped meanwhile
        const std::string name = relname;
        const auto found = counted.find(g.relid);
        const int64 records = found == counted.end() ? 0 : found->second;
        const Datum name_datum = text_datum(name);
        pg_call([&] {
            const bool from_start = g.start == INT64_MIN, open_end = g.end == INT64_MAX;
            Datum values[5] = {name_datum, TimestampTzGetDatum(g.start), TimestampTzGetDatum(g.end), Int64GetDatum(records),
                               TimestampTzGetDatum(open_end ? 0 : g.end + retention)};
            bool nulls[5] = {false, from_start, open_end, false, open_end};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        });
    }
    spi.finish();
    return (Datum)0;
}
