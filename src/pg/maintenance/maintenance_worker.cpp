// The background scheduler (DESIGN §3.6): with whizbang in shared_preload_libraries, one
// background worker per database named in whizbang.maintenance_databases runs the maintenance
// tasks every whizbang.maintenance_naptime. Each batch is its own transaction, so row locks are
// held for one batch only. Without the preload, or with an empty database list, nothing runs.
//
// A database where the extension is not installed (or is older than 0.4.0) is looked at again
// each naptime and otherwise left alone. An error ends the worker; the postmaster starts it
// again after bgw_restart_time, like any crashed-and-restarted worker.
#include <algorithm>
#include <cstring>
#include <string>

#include "pg/lease/lease_store.h"
#include "pg/boundary/bridge.h"
#include "pg/maintenance/maintenance.h"
#include "pg/boundary/spi.h"
#include "pg/wait/work_wait.h"

extern "C" {
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "utils/guc.h"
#include "utils/varlena.h"

PGDLLEXPORT void whizbang_maintenance_main(Datum arg);
}

using namespace whizbang;
using namespace whizbang::pg;

namespace {

int maintenance_naptime = 60;         // seconds
int maintenance_batch_size = 10000;   // rows per batch
int maintenance_batch_delay = 100;    // ms between two batches of a round
char* maintenance_databases = nullptr;

constexpr int kRestartSeconds = 10;

// Where the current round's tasks are, across its transactions.
TaskRun worker_runs[kTaskCount];

}  // namespace

// Internal, not in SQL: one batch of each unfinished task of the current round; returns whether
// any is left. Called through the fmgr entry wrapper, so its C++ objects unwind before an error
// is raised.
// The background worker's batch (DirectFunctionCall), not SQL-callable: no routing policy.
WB_FUNCTION(wb_maintenance_worker_batch) {
    PG_RETURN_BOOL(run_batches(worker_runs, GetCurrentTimestamp(), maintenance_batch_size));
}

namespace {

// Whether this database has a whizbang with maintenance (0.4.0 or later).
bool maintenance_installed() {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    PushActiveSnapshot(GetTransactionSnapshot());
    bool installed = false;
    if (SPI_connect() == SPI_OK_CONNECT) {
        int rc = SPI_execute(
            "SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n"
            "    ON n.oid OPERATOR(pg_catalog.=) p.pronamespace"
            " WHERE n.nspname OPERATOR(pg_catalog.=) 'whizbang' AND p.proname OPERATOR(pg_catalog.=) 'perform_maintenance'",
            true, 1);
        installed = rc == SPI_OK_SELECT && SPI_processed > 0;
        // A distributed install (whizbang.distribute()) keeps its rows on the Citus nodes, where
        // run_maintenance scheduled on the coordinator purges them node by node; a worker on
        // each node purging on its own would only race it (docs/scaleout.md).
        if (installed) {
            rc = SPI_execute("SELECT 1 WHERE pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL", true, 1);
            if (rc == SPI_OK_SELECT && SPI_processed > 0) {
                rc = SPI_execute(
                    "SELECT 1 FROM pg_catalog.pg_dist_partition"
                    " WHERE logicalrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass('whizbang.wh_inbox')",
                    true, 1);
                if (rc == SPI_OK_SELECT && SPI_processed > 0) installed = false;
            }
        }
        SPI_finish();
    }
    PopActiveSnapshot();
    CommitTransactionCommand();
    return installed;
}

// One round: batches, each committed, until every task is done or a shutdown is asked for.
// Between two batches the worker sleeps maintenance_batch_delay, as autovacuum's cost delay
// does: a big backlog is purged more slowly, and the application's own writes (which share the
// cores and the WAL with it) keep most of their throughput meanwhile (bench/purge).
void run_round() {
    for (TaskRun& run : worker_runs) run = TaskRun{};
    bool more = true;
    while (more) {
        CHECK_FOR_INTERRUPTS();
        SetCurrentStatementStartTimestamp();
        StartTransactionCommand();
        // Whatever default_transaction_isolation says: the retirement of dedup generations needs
        // a snapshot per statement (generation_retention.h).
        XactIsoLevel = XACT_READ_COMMITTED;
        PushActiveSnapshot(GetTransactionSnapshot());
        pgstat_report_activity(STATE_RUNNING, "whizbang maintenance");
        more = DatumGetBool(DirectFunctionCall1(wb_maintenance_worker_batch, (Datum)0));
        PopActiveSnapshot();
        CommitTransactionCommand();
        // A backend reports its table statistics when it goes idle; a worker must do it itself,
        // or autovacuum never learns of the rows it deleted (found by bench/purge).
        pgstat_report_stat(true);
        pgstat_report_activity(STATE_IDLE, nullptr);
        if (more && maintenance_batch_delay > 0) {
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, maintenance_batch_delay,
                            PG_WAIT_EXTENSION);
            ResetLatch(MyLatch);
        }
    }
    report_generations(worker_runs[0], LOG);
    int64 total = 0;
    for (const TaskRun& run : worker_runs) total += run.rows;
    if (total > 0) {
        ereport(LOG, (errmsg("whizbang maintenance: %s %lld, %s %lld, %s %lld, %s %lld rows",
                             task_name(Task::purge_old_deduplication), static_cast<long long>(worker_runs[0].rows),
                             task_name(Task::purge_expired_idempotency), static_cast<long long>(worker_runs[1].rows),
                             task_name(Task::purge_dead_letters), static_cast<long long>(worker_runs[2].rows),
                             task_name(Task::purge_processed), static_cast<long long>(worker_runs[3].rows))));
    }
}

// Milliseconds until the next round is due: maintenance_naptime after the end of the last one
// (0: now). The naptime is read at every wake-up, so a reload that changes it applies to the
// wait in progress. A clock set back makes the worker wait one naptime, not the jump as well.
long round_wait_ms(TimestampTz last_round_end) {
    const long naptime_ms = static_cast<long>(maintenance_naptime) * 1000L;
    const TimestampTz now = GetCurrentTimestamp();
    const TimestampTz due = TimestampTzPlusMilliseconds(last_round_end, naptime_ms);
    if (now >= due) return 0;
    return std::min(naptime_ms, TimestampDifferenceMilliseconds(now, due));
}

}  // namespace

void whizbang_maintenance_main(Datum arg) {
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGTERM, die);
    BackgroundWorkerUnblockSignals();
    char database[NAMEDATALEN];
    strlcpy(database, MyBgworkerEntry->bgw_extra, sizeof(database));
    BackgroundWorkerInitializeConnection(database, nullptr, 0);
    pgstat_report_appname("whizbang maintenance");
    // The batch statements' estimated cost sits near jit_above_cost, where compiling them costs
    // a third of a batch and saves nothing (bench/purge).
    SetConfigOption("jit", "off", PGC_USERSET, PGC_S_SESSION);
    // A database's own timeouts are for its applications: a batch cut short would end the
    // worker (an error in a background worker is fatal) and restart its round forever.
    SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("lock_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
    // The worker runs as a superuser, so it must not resolve any name through a path the
    // database's owner chose (ALTER DATABASE ... SET search_path, applied at connection): its
    // SQL is qualified throughout, and nothing but pg_catalog is searched even so (DESIGN §4).
    SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

    // The latch is set for many reasons besides a shutdown or a reload (a catalog change in any
    // database, ...): a wake-up only recomputes how long is left. The first round comes one
    // naptime after the worker starts, like every later one after the end of the previous: a
    // server start (or a worker restarted after an error) does not purge at once.
    TimestampTz last_round_end = GetCurrentTimestamp();
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        const long wait_ms = round_wait_ms(last_round_end);
        if (wait_ms > 0) {
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms, PG_WAIT_EXTENSION);
            ResetLatch(MyLatch);
            continue;
        }
        if (maintenance_installed()) run_round();
        last_round_end = GetCurrentTimestamp();
    }
}

namespace whizbang::pg {

void maintenance_define_settings() {
    DefineCustomIntVariable("whizbang.maintenance_naptime",
                            "Seconds from the end of one maintenance round of the background worker (or from its start) "
                            "to the next round.",
                            nullptr,
                            &maintenance_naptime, 60, 1, 86400, PGC_SIGHUP, GUC_UNIT_S, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("whizbang.maintenance_batch_size",
                            "Rows per batch (and per transaction) of the background worker's maintenance.", nullptr,
                            &maintenance_batch_size, 10000, 1, 1000000, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("whizbang.maintenance_batch_delay",
                            "Milliseconds the background worker sleeps between two batches (0: none).", nullptr,
                            &maintenance_batch_delay, 100, 0, 60000, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr, nullptr);
}

void maintenance_preload_init() {
    DefineCustomStringVariable("whizbang.maintenance_databases",
                               "Databases in which a background worker runs whizbang's maintenance "
                               "(comma-separated; empty: none). Needs shared_preload_libraries = 'whizbang'.",
                               nullptr, &maintenance_databases, "", PGC_POSTMASTER, 0, nullptr, nullptr, nullptr);
}

void maintenance_register_workers() {
    char* list = pstrdup(maintenance_databases ? maintenance_databases : "");
    List* names = nullptr;
    if (!SplitIdentifierString(list, ',', &names)) {
        ereport(WARNING, (errmsg("whizbang.maintenance_databases is not a valid list of names: \"%s\"",
                                 maintenance_databases),
                          errhint("Separate database names with commas; quote names that need it.")));
        return;
    }
    ListCell* cell;
    int index = 0;
    foreach (cell, names) {
        const char* name = static_cast<const char*>(lfirst(cell));
        BackgroundWorker worker;
        memset(&worker, 0, sizeof(worker));
        worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
        worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
        worker.bgw_restart_time = kRestartSeconds;
        strlcpy(worker.bgw_library_name, "whizbang", BGW_MAXLEN);
        strlcpy(worker.bgw_function_name, "whizbang_maintenance_main", BGW_MAXLEN);
        snprintf(worker.bgw_name, BGW_MAXLEN, "whizbang maintenance %s", name);
        strlcpy(worker.bgw_type, "whizbang maintenance", BGW_MAXLEN);
        strlcpy(worker.bgw_extra, name, BGW_EXTRALEN);
        worker.bgw_main_arg = Int32GetDatum(index++);
        RegisterBackgroundWorker(&worker);
    }
}

}  // namespace whizbang::pg
