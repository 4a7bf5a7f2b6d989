// CALL whizbang.run_maintenance() (DESIGN §3.6): perform_maintenance's four tasks, committing
// after every batch.
//
// perform_maintenance is a function, so all its batches share the caller's transaction: every
// row it deletes stays locked, and its snapshot holds back the xmin horizon, until the caller
// commits (31 s at 10M records). A procedure CALLed outside a transaction block may commit: this
// one commits after every batch (one batch of each unfinished task, the background worker's unit),
// so row locks and the snapshot last one batch. The batches are maintenance.cpp's run_batches.
//
// Its CREATE PROCEDURE has no SET search_path clause, on purpose: PostgreSQL makes a procedure
// with a SET clause atomic (the setting could not be restored across a commit), and COMMIT then
// fails. Each of its transactions sets search_path = pg_catalog, pg_temp itself instead, for the
// duration of its batch, as a SET clause would (DESIGN §4).
#include "pg/boundary/args.h"
#include "pg/citus/citus_route.h"
#include "pg/maintenance/maintenance.h"
#include "pg/boundary/spi.h"

extern "C" {
#include "utils/guc.h"
}

using namespace whizbang;
using namespace whizbang::pg;

namespace {

// Whether the procedure may end transactions: CALLed outside a transaction block, not from a
// function, nor from a procedure that is SECURITY DEFINER or has a SET clause (ExecuteCallStmt
// decides, and says so in the CallContext).
bool may_commit(FunctionCallInfo fcinfo) {
    return fcinfo->context != nullptr && IsA(fcinfo->context, CallContext) &&
           !castNode(CallContext, fcinfo->context)->atomic;
}

// One transaction's batches with search_path = pg_catalog, pg_temp, set and restored the way
// fmgr does for a function's SET clause. On an error the transaction's abort restores it.
bool batches_in_safe_path(TaskRun (&runs)[kTaskCount], TimestampTz now, int batch_size) {
    const int level = pg_call([] {
        const int nest_level = NewGUCNestLevel();
        (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
                                true, 0, false);
        return nest_level;
    });
    const bool more = run_batches(runs, now, batch_size);
    pg_call([level] { AtEOXact_GUC(true, level); });
    return more;
}

}  // namespace

// run_maintenance(p_now, p_batch_size): reports one NOTICE per task.
WB_ROUTED_FUNCTION(wb_run_maintenance, every_node) {
    if (!may_commit(fcinfo))
        throw SqlError(ERRCODE_ACTIVE_SQL_TRANSACTION, "whizbang.run_maintenance() cannot run inside a transaction block",
                       "It commits after every batch, which a transaction block, a function, or a procedure that "
                       "is SECURITY DEFINER or has a SET clause does not allow.",
                       "CALL it on its own, outside BEGIN ... COMMIT (pg_cron does), or purge within the current "
                       "transaction with SELECT * FROM whizbang.perform_maintenance().");
    const TimestampTz now = timestamptz_arg(fcinfo, 0, "p_now");
    const int batch = positive_int_arg(fcinfo, 1, "p_batch_size");
    TaskRun runs[kTaskCount];
    if (must_route()) {
        // A distributed install: shard by shard, one shard of one node per transaction, so no
        // node holds a long transaction (its locks, its snapshot) for the whole purge.
        SpiConnection spi(/*nonatomic=*/true);
        const std::vector<int> anchors = routing_anchors();
        bool first = true;
        for (int anchor : anchors) {
            for (int shard : node_shard_anchors(anchor)) {
                if (!first) spi.commit();
                first = false;
                const std::vector<int> one{shard};
                run_on_node(runs, anchor, now, batch, &one);
            }
        }
        spi.finish();
    } else {
        SpiConnection spi(/*nonatomic=*/true);
        // The last transaction is not committed here: it ends with the CALL.
        while (batches_in_safe_path(runs, now, batch)) spi.commit();
        spi.finish();
    }
    for (int t = 0; t < kTaskCount; ++t) {
        const TaskRun& run = runs[t];
        pg_call([&] {
            ereport(NOTICE, (errmsg("whizbang maintenance: %s %s, %lld rows in %lld batches, %.1f ms",
                                    task_name(static_cast<Task>(t)), run.skipped ? "skipped" : "ok",
                                    static_cast<long long>(run.rows), static_cast<long long>(run.batches), run.ms)));
        });
    }
    PG_RETURN_VOID();
}
