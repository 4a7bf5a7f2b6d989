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
#include <algorithm>
#include <vector>
#include <utility>

#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/boundary/spi.h"
#include "pg/boundary/statement_settings.h"
#include "pg/citus/citus_route.h"
#include "pg/citus/shard_scope.h"
#include "pg/maintenance/maintenance.h"
#include "pg/boundary/required_privileges.h"

extern "C" {
#include "funcapi.h"
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

// Runs f() with search_path = pg_catalog, pg_temp, set and restored the way fmgr does for a
// function's SET clause (DESIGN §4), for one transaction's work. On an error the transaction's
// abort restores it.
template <typename F>
auto in_safe_path(F&& f) {
    return with_settings({{"search_path", "pg_catalog, pg_temp"}}, std::forward<F>(f));
}

bool batches_in_safe_path(TaskRun (&runs)[kTaskCount], TimestampTz now, int batch_size) {
    return in_safe_path([&] { return run_batches(runs, now, batch_size); });
}

// A task's position between the batches of a distributed run, as _maintenance_batch's p_state
// carries it: kStateWidth numbers per task, in task order; the last one, on the way back only,
// is whether the call ran a batch of the task (the NOTICE counts batches as one server would).
constexpr int kStateWidth = 8;

std::vector<int64_t> state_of(const TaskRun& run) {
    std::vector<int64_t> out(kStateWidth);
    out[0] = run.started;
    out[1] = run.done;
    out[2] = run.skipped;
    out[3] = run.phase;
    out[4] = run.position;
    out[5] = run.end_block;
    out[6] = run.rows_per_block;
    out[7] = run.batches;
    return out;
}

void run_of(const int64_t* in, TaskRun& run) {
    run.started = in[0] != 0;
    run.done = in[1] != 0;
    run.skipped = in[2] != 0;
    run.phase = static_cast<int>(in[3]);
    run.position = in[4];
    run.end_block = in[5];
    run.rows_per_block = in[6];
}

// Whether the installed SQL has _maintenance_batch (0.11.0): a library newer than the SQL, before
// ALTER EXTENSION UPDATE, purges a shard per transaction instead.
bool per_batch_on_nodes() {
    static whizbang::pg::CachedPlan plan(
        "SELECT pg_catalog.to_regprocedure('whizbang._maintenance_batch(pg_catalog.timestamptz, pg_catalog.int4, "
        "pg_catalog.int8[])') IS NOT NULL",
        {});
    plan.execute({});
    bool isnull = false;
    return DatumGetBool(spi_value(0, 1, &isnull));
}

[[noreturn]] void bad_answer(const std::string& what) {
    throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "whizbang: a node answered " + what + " to maintenance",
                   "Every node needs whizbang at the coordinator's version.");
}

// One batch of every unfinished task on the shard of `shard_anchor` (a partition), in the current
// transaction, with an SPI connection of its own (what the call allocates is freed before the
// commit, not kept till the end of the CALL); `state` carries the tasks' positions from one call
// to the next (empty: fresh). Returns whether any task has more to do there.
bool batch_on_shard(TaskRun (&runs)[kTaskCount], std::vector<int64_t>& state, int shard_anchor, TimestampTz now,
                    int batch) {
    SpiConnection spi;
    const std::vector<int> one{shard_anchor};
    const std::vector<int64_t> before = state;
    const uint64 rows = in_safe_path([&] {
        return routed_call(shard_anchor, "_maintenance_batch", {TIMESTAMPTZOID, INT4OID, INT8ARRAYOID},
                           {TimestampTzGetDatum(now), Int32GetDatum(batch), state.empty() ? (Datum)0 : int8_array(state)},
                           {' ', ' ', state.empty() ? 'n' : ' '}, 0, nullptr, &one);
    });
    if (rows != static_cast<uint64>(kTaskCount))
        bad_answer(std::to_string(rows) + " rows for " + std::to_string(kTaskCount) + " tasks");
    bool more = false, progress = false;
    state.clear();
    for (uint64 r = 0; r < rows; ++r) {
        bool nulls[5] = {};
        Datum name = spi_value(r, 1, &nulls[0]), affected = spi_value(r, 2, &nulls[1]), ms = spi_value(r, 3, &nulls[2]),
              status_datum = spi_value(r, 4, &nulls[3]), task_state_datum = spi_value(r, 5, &nulls[4]);
        for (bool n : nulls)
            if (n) bad_answer("a NULL");
        if (text_from_datum(name) != task_name(static_cast<Task>(r))) bad_answer("its tasks out of order");
        const std::vector<int64_t> task_state = int8_array_values(task_state_datum);
        if (task_state.size() != static_cast<std::size_t>(kStateWidth)) bad_answer("a malformed state");
        const int64_t affected_rows = DatumGetInt64(affected);
        runs[r].rows += affected_rows;
        runs[r].ms += DatumGetFloat8(ms);
        runs[r].batches += task_state[kStateWidth - 1];
        const std::string status = text_from_datum(status_datum);
        if (status == "skipped") runs[r].skipped = true;
        if (status == "more") more = true;
        progress = progress || affected_rows > 0 || before.empty() ||
                   !std::equal(task_state.begin(), task_state.end() - 1, before.begin() + r * kStateWidth);
        for (int64_t v : task_state) state.push_back(v);
    }
    if (more && !progress) bad_answer("more to do, with nothing done and its position unchanged");
    spi.finish();
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
    require_privileges("run_maintenance");
    TaskRun runs[kTaskCount];
    if (must_route()) {
        // A distributed install: shard by shard, and on each shard batch by batch, each in a
        // transaction of its own (the node's locks and snapshot last one batch, as on one server).
        SpiConnection spi(/*nonatomic=*/true);
        const bool per_batch = per_batch_on_nodes();
        std::vector<int> shards;
        for (int anchor : routing_anchors())
            for (int shard : node_shard_anchors(anchor)) shards.push_back(shard);
        bool first = true;
        for (int shard : shards) {
            if (!per_batch) {
                if (!first) spi.commit();
                first = false;
                const std::vector<int> one{shard};
                SpiConnection part;
                in_safe_path([&] {
                    run_on_node(runs, shard, now, batch, &one);
                    return true;
                });
                part.finish();
                continue;
            }
            std::vector<int64_t> state;
            bool more = true;
            while (more) {
                if (!first) spi.commit();
                first = false;
                more = batch_on_shard(runs, state, shard, now, batch);
            }
        }
        spi.finish();
    } else {
        SpiConnection spi(/*nonatomic=*/true);
        // The last transaction is not committed here: it ends with the CALL.
        while (batches_in_safe_path(runs, now, batch)) spi.commit();
        spi.finish();
    }
    report_generations(runs[0], NOTICE);
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

// _maintenance_batch(p_now, p_batch_size, p_state) RETURNS TABLE(task_name, rows_affected,
// duration_ms, status, state): run_maintenance's part on a node of a distributed install, one
// batch of each unfinished task on one shard (status more: not through yet).
WB_ROUTED_FUNCTION(wb_maintenance_batch, local) {
    const TimestampTz now = timestamptz_arg(fcinfo, 0, "p_now");
    const int batch = positive_int_arg(fcinfo, 1, "p_batch_size");
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    if (in_node_scope()) {
        // The node call: to the shard it names, here.
        SpiConnection spi;
        std::vector<RoutedRow> out = call_on_every_shard(fcinfo, "_maintenance_batch");
        spi.finish();
        put_in_order(rsinfo, out);
        return (Datum)0;
    }
    if (!in_shard_scope())
        throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED,
                       "whizbang._maintenance_batch() is run_maintenance's part on a node of a distributed install",
                       "", "CALL whizbang.run_maintenance(), or SELECT * FROM whizbang.perform_maintenance().");
    TaskRun runs[kTaskCount];
    if (std::optional<std::vector<std::optional<int64_t>>> given = int8_array_arg(fcinfo, 2, "p_state")) {
        require_same_length(static_cast<std::size_t>(kTaskCount * kStateWidth), "the tasks' positions", given->size(),
                            "p_state");
        std::vector<int64_t> values;
        for (const auto& v : *given) values.push_back(v.value_or(0));
        for (int t = 0; t < kTaskCount; ++t) run_of(values.data() + t * kStateWidth, runs[t]);
    }
    (void)run_batches(runs, now, batch);
    for (int t = 0; t < kTaskCount; ++t) {
        const std::vector<int64_t> state = state_of(runs[t]);
        Datum name = text_datum(task_name(static_cast<Task>(t)));
        Datum status = text_datum(runs[t].skipped ? "skipped" : runs[t].done ? "ok" : "more");
        Datum state_array = int8_array(state);
        pg_call([&] {
            Datum values[5] = {name, Int64GetDatum(runs[t].rows), Float8GetDatum(runs[t].ms), status, state_array};
            bool nulls[5] = {false, false, false, false, false};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        });
    }
    return (Datum)0;
}
