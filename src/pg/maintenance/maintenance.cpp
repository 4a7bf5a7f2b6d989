// Retention (DESIGN §3.6): perform_maintenance and the batches of its four tasks.
//
// What no purge may do (principle 3): forget the dedup record of a message that is still
// waiting (in wh_inbox, or in wh_dead_letters where retry_dead_letters could bring it back),
// or delete pending work. Each task therefore deletes only rows that are finished and old, and
// re-checks that in the statement that deletes them.
//
// Bounded batches: a statement touches about p_batch_size rows and then returns, so interrupts
// are seen and, in the background worker (which commits after every batch), row locks are held
// briefly. A run keeps its position between batches — the next block of the dedup table, the
// last expiry time of the idempotency index — so a backlog of N rows costs O(N), not O(N²).
#include <algorithm>
#include <chrono>
#include <string>

#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/citus/citus_route.h"
#include "pg/lease/lease_store.h"
#include "pg/maintenance/generation_retention.h"
#include "pg/store/generations.h"
#include "pg/maintenance/maintenance.h"
#include "pg/boundary/settings.h"
#include "pg/citus/shard_scope.h"
#include "pg/boundary/spi.h"
#include "pg/claim/work.h"
#include "pg/boundary/required_privileges.h"

namespace whizbang::pg {
namespace {

// The advisory-lock class of maintenance: "whzb". The task number is the object id.
constexpr int32 kLockClass = 0x77687a62;

CachedPlan try_lock_plan("SELECT pg_catalog.pg_try_advisory_xact_lock($1, $2)", {INT4OID, INT4OID});

// purge_old_deduplication ------------------------------------------------------------------

// On a table in generations, the row purge is left for the records an upgrade attached as they
// were (the generation from MINVALUE, wh_message_deduplication_legacy), until it leaves the
// window whole.
constexpr const char* kDedupTables[2] = {"whizbang.wh_message_deduplication", "whizbang.wh_message_deduplication_legacy"};

CachedPlan dedup_extent_plan(int table) {
    const std::string t = kDedupTables[table];
    return CachedPlan("SELECT pg_catalog.pg_relation_size('" + t + "'::pg_catalog.regclass)"
                      "         OPERATOR(pg_catalog./) pg_catalog.current_setting('block_size')::pg_catalog.int8,"
                      "       c.reltuples::pg_catalog.int8, c.relpages::pg_catalog.int8"
                      "  FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) '" + t + "'::pg_catalog.regclass",
                      {});
}
CachedPlan dedup_extent_plans[2] = {dedup_extent_plan(0), dedup_extent_plan(1)};

// One range of blocks, read by a TID range scan: records first seen before the horizon whose
// message is neither waiting in the inbox nor dead-lettered there. They are locked first, without
// waiting: a store that is counting a redelivery of one of them holds it (stores lock records in
// key order, a purge meets them in block order — waiting could deadlock); the purge leaves that
// record for its next run.
CachedPlan purge_dedup_plan(int table) {
    const std::string t = kDedupTables[table];
    return CachedPlan(
        "DELETE FROM " + t + " d"
        " WHERE d.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
        "   SELECT x.ctid FROM " + t + " x"
        "    WHERE x.ctid OPERATOR(pg_catalog.>=) $2 AND x.ctid OPERATOR(pg_catalog.<) $3"
        "      AND x.first_seen_at OPERATOR(pg_catalog.<) $1"
        "      AND NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox/*message*/ i"
        "                       WHERE i.message_id OPERATOR(pg_catalog.=) x.message_id"
        "                         AND i.consumer OPERATOR(pg_catalog.=) x.consumer)"
        "      AND NOT EXISTS (SELECT 1 FROM whizbang.wh_dead_letters l"
        "                       WHERE l.message_id OPERATOR(pg_catalog.=) x.message_id"
        "                         AND l.consumer OPERATOR(pg_catalog.=) x.consumer"
        "                         AND l.source OPERATOR(pg_catalog.=) 'inbox')"
        "      FOR UPDATE OF x SKIP LOCKED))",
        {TIMESTAMPTZOID, TIDOID, TIDOID});
}
CachedPlan purge_dedup_plans[2] = {purge_dedup_plan(0), purge_dedup_plan(1)};

// How long maintenance waits for the table lock of a generation's creation or drop before it
// leaves that to its next run: while it waits, stores queue behind it.
constexpr int kGenerationLockTimeoutMs = 500;

// purge_expired_idempotency ------------------------------------------------------------------

// Results past their TTL: the result goes, the key stays as a tombstone (idempotency_begin
// answers expired_duplicate for it whether or not the result is still stored).
CachedPlan tombstone_plan(
    "UPDATE whizbang.wh_idempotency_keys k SET result = NULL"
    "  FROM (SELECT scope, idempotency_key FROM whizbang.wh_idempotency_keys"
    "         WHERE state OPERATOR(pg_catalog.=) 'completed' AND result_expires_at OPERATOR(pg_catalog.<=) $1"
    "           AND result_expires_at OPERATOR(pg_catalog.>=) $2 AND result IS NOT NULL"
    "         ORDER BY result_expires_at LIMIT $3 FOR UPDATE SKIP LOCKED) v"
    " WHERE k.scope OPERATOR(pg_catalog.=) v.scope AND k.idempotency_key OPERATOR(pg_catalog.=) v.idempotency_key"
    " RETURNING k.result_expires_at",
    {TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID});

// Tombstones past theirs (a tombstone never expires before its result did: same index).
CachedPlan forget_keys_plan(
    "DELETE FROM whizbang.wh_idempotency_keys k"
    " USING (SELECT scope, idempotency_key FROM whizbang.wh_idempotency_keys"
    "         WHERE state OPERATOR(pg_catalog.=) 'completed' AND result_expires_at OPERATOR(pg_catalog.<=) $1"
    "           AND result_expires_at OPERATOR(pg_catalog.>=) $2 AND tombstone_expires_at OPERATOR(pg_catalog.<=) $1"
    "         ORDER BY result_expires_at LIMIT $3 FOR UPDATE SKIP LOCKED) v"
    " WHERE k.scope OPERATOR(pg_catalog.=) v.scope AND k.idempotency_key OPERATOR(pg_catalog.=) v.idempotency_key"
    " RETURNING k.result_expires_at",
    {TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID});

// purge_dead_letters -------------------------------------------------------------------------

CachedPlan purge_dead_letters_plan(
    "DELETE FROM whizbang.wh_dead_letters d"
    " WHERE d.dead_letter_id OPERATOR(pg_catalog.=) ANY (SELECT x.dead_letter_id FROM whizbang.wh_dead_letters x"
    "                             WHERE x.dead_lettered_at OPERATOR(pg_catalog.<) $1"
    "                             ORDER BY x.dead_lettered_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
    {TIMESTAMPTZOID, INT4OID});

// purge_processed ------------------------------------------------------------------------------

// debug_mode leftovers: work completed (processed_at set) before the horizon (found through the partial index on processed_at, which holds those rows only).
const char* const kProcessed =
    "DELETE FROM whizbang.wh_inbox w"
    " WHERE (w.message_id, w.consumer) OPERATOR(pg_catalog.=) ANY ("
    "        SELECT x.message_id, x.consumer FROM whizbang.wh_inbox x"
    "         WHERE x.processed_at OPERATOR(pg_catalog.<) $1 AND x.processed_at IS NOT NULL"
    "         ORDER BY x.processed_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
    " RETURNING w.message_id, w.consumer";
// In the split layout (before 0.14.0) the messages of the purged work rows go too.
WorkPlan purge_processed_plans = WorkPlan(kProcessed, {TIMESTAMPTZOID, INT4OID})
    .split_as(split_twin(std::string("WITH w AS (") + kProcessed + ")"
                         " DELETE FROM whizbang.wh_inbox/*message*/ i USING w"
                         "  WHERE i.message_id OPERATOR(pg_catalog.=) w.message_id"
                         "    AND i.consumer OPERATOR(pg_catalog.=) w.consumer RETURNING 1"),
              split_twin(outbox_twin(std::string("WITH w AS (") + kProcessed + ")"
                         " DELETE FROM whizbang.wh_inbox/*message*/ i USING w"
                         "  WHERE i.message_id OPERATOR(pg_catalog.=) w.message_id RETURNING 1")));

// Pre-lease entries whose row was completed, or re-claimed by another instance after the lease
// lapsed (an instance that stores pre-leased work but never claims again leaves them). The
// lease is in the row (table store) or among the shared leases passed from $3 on (lease_store.h).
std::vector<Oid> stale_preleased_types() {
    std::vector<Oid> types{TIMESTAMPTZOID, INT4OID};
    for (Oid t : lease_param_types()) types.push_back(t);
    return types;
}
WorkPlan stale_preleased_plan(
    "DELETE FROM whizbang.wh_inbox_preleased p"
    " WHERE p.ctid OPERATOR(pg_catalog.=) ANY (SELECT q.ctid FROM whizbang.wh_inbox_preleased q"
    "                   WHERE NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox w"
    "                                      WHERE w.message_id OPERATOR(pg_catalog.=) q.message_id"
    "                                        AND w.consumer OPERATOR(pg_catalog.=) q.consumer"
    "                                        AND w.lease_instance OPERATOR(pg_catalog.=) q.instance_id"
    "                                        AND w.lease_token OPERATOR(pg_catalog.=) q.lease_token"
    "                                        AND w.lease_expiry OPERATOR(pg_catalog.>) $1)"
    "                     AND NOT EXISTS (SELECT 1 FROM " + lease_relation(3) +
    "                                      WHERE sl.message_id OPERATOR(pg_catalog.=) q.message_id"
    "                                        AND sl.consumer COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.=) q.consumer"
    "                                        AND sl.instance_id OPERATOR(pg_catalog.=) q.instance_id"
    "                                        AND sl.lease_token OPERATOR(pg_catalog.=) q.lease_token"
    "                                        AND sl.lease_expiry OPERATOR(pg_catalog.>) $1)"
    "                   LIMIT $2 FOR UPDATE SKIP LOCKED)",
    stale_preleased_types());

std::vector<Datum> stale_preleased_params(Source source, TimestampTz now, int batch) {
    std::vector<Datum> values{TimestampTzGetDatum(now), Int32GetDatum(batch)};
    for (Datum d : lease_params(source)) values.push_back(d);
    return values;
}

// Stream counters of streams with no work left. Two statements: the counters are locked first
// (a store numbering the stream holds its counter, so it is skipped), then deleted only if, in
// a snapshot taken after the lock, the stream still has no work row. A store that numbered the
// stream before the lock has committed by then, so its row is seen; one that comes after waits
// for the delete and starts the stream again at 1, which keeps its order (nothing is pending).
// Only unfinished rows count (a debug-mode leftover is never handed out again), which also lets
// the check use the stream index (it covers unfinished rows only).
WorkPlan lock_idle_streams_plan(
    "SELECT s.consumer::pg_catalog.text, s.stream_id FROM whizbang.wh_inbox_streams s"
    " WHERE NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox w"
    "                    WHERE w.consumer OPERATOR(pg_catalog.=) s.consumer"
    "                      AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id AND w.processed_at IS NULL)"
    " LIMIT $1 FOR UPDATE SKIP LOCKED",
    {INT4OID});
WorkPlan delete_idle_streams_plan(
    "DELETE FROM whizbang.wh_inbox_streams s"
    " USING ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(consumer, stream_id)"
    " WHERE s.consumer OPERATOR(pg_catalog.=) u.consumer AND s.stream_id OPERATOR(pg_catalog.=) u.stream_id"
    "   AND NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox w"
    "                    WHERE w.consumer OPERATOR(pg_catalog.=) s.consumer"
    "                      AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id AND w.processed_at IS NULL)",
    {TEXTARRAYOID, UUIDARRAYOID});

Datum tid_datum(int64_t block) {
    return pg_call([&] {
        ItemPointer tid = static_cast<ItemPointer>(palloc(sizeof(ItemPointerData)));
        ItemPointerSet(tid, static_cast<BlockNumber>(block), 0);
        return PointerGetDatum(tid);
    });
}

int64_t int8_value(uint64 row, int col) {
    bool isnull = false;
    Datum d = spi_value(row, col, &isnull);
    return isnull ? 0 : DatumGetInt64(d);
}

TimestampTz days_before(TimestampTz now, const char* setting) {
    return add_to_timestamp(now, -setting_int(setting) * USECS_PER_DAY, "the retention horizon");
}

// Runs a batch statement returning the expiry times it touched; advances `position` to the
// latest (the index order), and returns how many rows it touched.
int64_t by_expiry(CachedPlan& plan, TimestampTz now, int64_t& position, int batch) {
    uint64 n = plan.execute({TimestampTzGetDatum(now), TimestampTzGetDatum(position), Int32GetDatum(batch)});
    for (uint64 r = 0; r < n; ++r) position = std::max(position, int8_value(r, 1));
    return static_cast<int64_t>(n);
}

// Phases: 0 the single table, row by row (before 0.12.0, and a distributed install); on a table
// in generations 2 purges the upgrade's legacy records row by row while they are still inside
// the window, then 1 retires whole generations. The retirement comes last: its ACCESS EXCLUSIVE
// lock lasts until the transaction ends, so no row purge of this transaction runs under it.
bool legacy_partition_left() {
    const std::vector<GenerationBound> bounds = list_generations();
    return !bounds.empty() && bounds.front().start == INT64_MIN &&
           pg_call([&] { return get_rel_name(bounds.front().relid); }) == std::string("wh_message_deduplication_legacy");
}

void dedup_batch(TaskRun& run, TimestampTz now, int batch) {
    if (!run.started) run.phase = !in_shard_scope() && dedup_in_generations() ? (legacy_partition_left() ? 2 : 1) : 0;
    if (run.phase == 1) {
        GenerationRetirement retired;
        retire_generations(now, kGenerationLockTimeoutMs, retired);
        // Left for the next run: a lock not granted in time, or a transaction snapshot.
        if (retired.busy > 0 || retired.needs_fresh_snapshot) run.skipped = true;
        if (retired.needs_fresh_snapshot)
            pg_call([] {
                ereport(NOTICE,
                        (errmsg("whizbang maintenance: dedup generations that left the window were not dropped"),
                         errdetail("Under REPEATABLE READ or SERIALIZABLE the transaction's snapshot is older than the "
                                   "locks that decide which records still have a waiting message."),
                         errhint("Run perform_maintenance in a READ COMMITTED transaction, as the background "
                                 "worker does.")));
            });
        run.rows += retired.records;
        run.generations_dropped += retired.dropped;
        run.records_moved += retired.moved;
        run.done = true;
        return;
    }
    const int table = run.phase == 2 ? 1 : 0;
    if (!run.started) {
        dedup_extent_plans[table].execute({});
        run.end_block = int8_value(0, 1);
        const int64_t tuples = int8_value(0, 2), pages = int8_value(0, 3);
        run.rows_per_block = (tuples > 0 && pages > 0) ? std::max<int64_t>(1, tuples / pages) : 64;
        run.position = 0;
    }
    // The rows are through: the legacy records' purge goes on with the generations' retirement.
    auto rows_through = [&run] {
        if (run.phase == 2)
            run.phase = 1;
        else
            run.done = true;
    };
    if (run.position >= run.end_block) {
        rows_through();
        return;
    }
    const int64_t blocks = std::max<int64_t>(1, batch / run.rows_per_block);
    const int64_t to = std::min(run.end_block, run.position + blocks);
    run.rows += static_cast<int64_t>(purge_dedup_plans[table].execute(
        {TimestampTzGetDatum(days_before(now, "dedup_retention_days")), tid_datum(run.position), tid_datum(to)}));
    run.position = to;
    if (run.position >= run.end_block) rows_through();
}

// One batch of the idempotency purge: tombstones (phase 0), then forgotten keys (phase 1); 2 when
// both are through.
void idempotency_step(TaskRun& run, TimestampTz now, int batch) {
    CachedPlan& plan = run.phase == 0 ? tombstone_plan : forget_keys_plan;
    const int64_t n = by_expiry(plan, now, run.position, batch);
    run.rows += n;
    if (n < batch) {
        run.position = DT_NOBEGIN;
        ++run.phase;
    }
}

// Inside a routed call (a distributed install's maintenance, one call per shard of the work
// tables): the idempotency keys are a colocation group of their own, so the call for the
// node's first shard purges every key shard on the node, one batch at a time (end_block: the
// key shard at hand, in idempotency_shards_of_first_local_shard's order); the others none.
void idempotency_on_node(TaskRun& run, TimestampTz now, int batch) {
    const std::vector<int64_t> shards = idempotency_shards_of_first_local_shard();
    if (!run.started) {
        run.end_block = 0;
        run.phase = 0;
        run.position = DT_NOBEGIN;
    }
    if (run.end_block < static_cast<int64_t>(shards.size())) {
        ShardTableOverride keys("wh_idempotency_keys", shards[static_cast<std::size_t>(run.end_block)]);
        idempotency_step(run, now, batch);
        if (run.phase == 2) {
            ++run.end_block;
            run.phase = 0;
            run.position = DT_NOBEGIN;
        }
    }
    run.done = run.end_block >= static_cast<int64_t>(shards.size());
}

void idempotency_batch(TaskRun& run, TimestampTz now, int batch) {
    if (!run.started) run.position = DT_NOBEGIN;
    idempotency_step(run, now, batch);
    run.done = run.phase == 2;
}

void dead_letters_batch(TaskRun& run, TimestampTz now, int batch) {
    const int64_t n = static_cast<int64_t>(purge_dead_letters_plan.execute(
        {TimestampTzGetDatum(days_before(now, "dead_letter_retention_days")), Int32GetDatum(batch)}));
    run.rows += n;
    run.done = n < batch;
}

// Phases: processed inbox work, processed outbox work, then (not counted: bookkeeping, not
// messages) stale pre-lease entries and idle stream counters of each source.
void processed_batch(TaskRun& run, TimestampTz now, int batch) {
    const Source source = run.phase % 2 == 0 ? Source::inbox : Source::outbox;
    int64_t n = 0;
    if (run.phase < 2) {
        n = static_cast<int64_t>(purge_processed_plans[source].execute(
            {TimestampTzGetDatum(days_before(now, "dedup_retention_days")), Int32GetDatum(batch)}));
        run.rows += n;
    } else if (run.phase < 4) {
        n = static_cast<int64_t>(stale_preleased_plan[source].execute(stale_preleased_params(source, now, batch)));
    } else if (IsolationUsesXactSnapshot()) {
        n = 0;  // the second statement needs a fresh snapshot: left to a READ COMMITTED run
    } else {
        uint64 locked = lock_idle_streams_plan[source].execute({Int32GetDatum(batch)});
        std::vector<std::string> consumers;
        std::vector<core::Uuid> streams;
        for (uint64 r = 0; r < locked; ++r) {
            bool isnull = false;
            consumers.push_back(text_from_datum(spi_value(r, 1, &isnull)));
            streams.push_back(uuid_from_datum(spi_value(r, 2, &isnull)));
        }
        if (!streams.empty()) delete_idle_streams_plan[source].execute({text_array(consumers), uuid_array(streams)});
        n = static_cast<int64_t>(locked);
    }
    if (n < batch && ++run.phase == 6) run.done = true;
}

}  // namespace

const char* task_name(Task task) {
    switch (task) {
        case Task::purge_old_deduplication: return "purge_old_deduplication";
        case Task::purge_expired_idempotency: return "purge_expired_idempotency";
        case Task::purge_dead_letters: return "purge_dead_letters";
        case Task::purge_processed: return "purge_processed";
    }
    return "unknown";
}

void run_batch(Task task, TaskRun& run, TimestampTz now, int batch_size) {
    if (run.done) return;
    const auto t0 = std::chrono::steady_clock::now();
    bool isnull = false;
    try_lock_plan.execute({Int32GetDatum(kLockClass), Int32GetDatum(static_cast<int>(task) + 1)});
    if (!DatumGetBool(spi_value(0, 1, &isnull))) {
        run.skipped = run.done = true;
        return;
    }
    switch (task) {
        case Task::purge_old_deduplication: dedup_batch(run, now, batch_size); break;
        case Task::purge_expired_idempotency:
            if (in_shard_scope())
                idempotency_on_node(run, now, batch_size);
            else
                idempotency_batch(run, now, batch_size);
            break;
        case Task::purge_dead_letters: dead_letters_batch(run, now, batch_size); break;
        case Task::purge_processed: processed_batch(run, now, batch_size); break;
    }
    run.started = true;
    ++run.batches;
    run.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    pg_call([] { CHECK_FOR_INTERRUPTS(); });
}

void run_on_node(TaskRun (&runs)[kTaskCount], int anchor, TimestampTz now, int batch_size,
                 const std::vector<int>* shard_anchors) {
    uint64 rows = routed_call(anchor, "perform_maintenance", {TIMESTAMPTZOID, INT4OID},
                              {TimestampTzGetDatum(now), Int32GetDatum(batch_size)}, {' ', ' '}, 0, nullptr,
                              shard_anchors);
    for (uint64 r = 0; r < rows && r < static_cast<uint64>(kTaskCount); ++r) {
        bool isnull = false;
        runs[r].rows += DatumGetInt64(spi_value(r, 2, &isnull));
        runs[r].ms += DatumGetFloat8(spi_value(r, 3, &isnull));
        runs[r].batches += 1;
        if (text_from_datum(spi_value(r, 4, &isnull)) == "skipped") runs[r].skipped = true;
    }
}

void report_generations(const TaskRun& run, int level) {
    if (run.generations_dropped == 0 && run.records_moved == 0) return;
    pg_call([&] {
        ereport(level, (errmsg("whizbang maintenance: dropped %lld dedup generations, moved %lld records forward",
                               static_cast<long long>(run.generations_dropped), static_cast<long long>(run.records_moved)),
                        run.records_moved > 0 ? errdetail("Their messages still wait in the inbox or in its dead "
                                                          "letters: the records stay until they are gone.")
                                              : 0));
    });
}

bool run_batches(TaskRun (&runs)[kTaskCount], TimestampTz now, int batch_size) {
    // Lease slots of prepared transactions that ended unseen (their end settles them) go now,
    // long before VACUUM can truncate the commit log past their xids.
    shm::settle_prepared();
    bool more = false;
    SpiConnection spi;
    for (Task task : kRunOrder) {
        const int t = static_cast<int>(task);
        run_batch(task, runs[t], now, batch_size);
        more = more || !runs[t].done;
    }
    spi.finish();
    return more;
}

}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// perform_maintenance(p_now, p_batch_size) RETURNS TABLE(task_name, rows_affected, duration_ms,
// status): every task to the end, in batches, inside the caller's transaction.
WB_ROUTED_FUNCTION(wb_perform_maintenance, every_node) {
    const TimestampTz now = timestamptz_arg(fcinfo, 0, "p_now");
    const int batch = positive_int_arg(fcinfo, 1, "p_batch_size");
    require_privileges("perform_maintenance");
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    TaskRun runs[kTaskCount];
    if (must_route()) {
        // Every node purges its shards (and, once, its idempotency keys) in the caller's
        // transaction; a task another run holds on a node is skipped there.
        SpiConnection spi;
        for (int anchor : routing_anchors()) run_on_node(runs, anchor, now, batch);
        spi.finish();
    } else {
        SpiConnection spi;
        for (Task task : kRunOrder)
            while (!runs[static_cast<int>(task)].done) run_batch(task, runs[static_cast<int>(task)], now, batch);
        spi.finish();
    }
    report_generations(runs[0], NOTICE);
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    for (int t = 0; t < kTaskCount; ++t) {
        Datum name = text_datum(task_name(static_cast<Task>(t)));
        Datum status = text_datum(runs[t].skipped ? "skipped" : "ok");
        pg_call([&] {
            Datum values[4] = {name, Int64GetDatum(runs[t].rows), Float8GetDatum(runs[t].ms), status};
            bool nulls[4] = {false, false, false, false};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        });
    }
    return (Datum)0;
}
