// stats() (DESIGN §3.7): one row per metric, counted now, in one statement (one snapshot), so
// the figures agree with each other. Exact counts: the work tables are meant to stay small;
// on a big dedup table the dedup_* metrics cost a scan of it.
#include <algorithm>

#include "pg/boundary/args.h"
#include "pg/citus/citus_route.h"
#include "pg/boundary/arrays.h"
#include "pg/lease/lease_store.h"
#include "pg/ops/counters.h"
#include "pg/ops/logical_slots.h"
#include "pg/ops/queues.h"
#include "pg/boundary/spi.h"
#include "pg/store/generations.h"
#include "pg/wait/work_wait.h"
#include "pg/boundary/required_privileges.h"
#include "pg/boundary/owner.h"

namespace whizbang::pg {
namespace {

// The five work metrics of one source, as (metric, value) rows: the sums of its rows of `q`,
// queues()' counts per (source, consumer) (queues.cpp has the definitions: pending, leased,
// scheduled, dead-lettered, the oldest pending message's age), so the two always agree.
std::string work_metrics(const char* source) {
    const std::string s(source);
    return "SELECT m.metric, m.value FROM (SELECT"
           "  COALESCE(pg_catalog.sum(q.pending), 0)::pg_catalog.int8 AS pending,"
           "  COALESCE(pg_catalog.sum(q.leased), 0)::pg_catalog.int8 AS leased,"
           "  COALESCE(pg_catalog.sum(q.scheduled), 0)::pg_catalog.int8 AS scheduled,"
           "  COALESCE(pg_catalog.sum(q.dead_lettered), 0)::pg_catalog.int8 AS dead_lettered,"
           "  COALESCE(pg_catalog.max(q.oldest_pending_seconds), 0)::pg_catalog.int8 AS oldest"
           "  FROM q WHERE q.source OPERATOR(pg_catalog.=) '" + s + "') c"
           " CROSS JOIN LATERAL (VALUES ('" + s + "_pending', c.pending), ('" + s + "_leased', c.leased),"
           "   ('" + s + "_scheduled', c.scheduled), ('" + s + "_dead_lettered', c.dead_lettered),"
           "   ('" + s + "_oldest_pending_seconds', c.oldest)) AS m(metric, value)";
}

CachedPlan stats_plan(
    "WITH q AS (" + queue_counts_sql() + ") " + work_metrics("inbox") + " UNION ALL " + work_metrics("outbox") +
        " UNION ALL "
        "SELECT m.metric, m.value FROM (SELECT pg_catalog.count(*) AS n,"
        "   COALESCE(pg_catalog.sum(observation_count OPERATOR(pg_catalog.-) 1 OPERATOR(pg_catalog.-) conflict_count), 0)::pg_catalog.int8 AS dup,"
        "   COALESCE(pg_catalog.sum(conflict_count), 0)::pg_catalog.int8 AS conflicts"
        "  FROM whizbang.wh_message_deduplication) d"
        " CROSS JOIN LATERAL (VALUES ('dedup_rows', d.n), ('dedup_duplicates_observed', d.dup),"
        "                            ('dedup_conflicts_observed', d.conflicts)) AS m(metric, value)"
        " UNION ALL "
        "SELECT m.metric, m.value FROM (SELECT"
        "   pg_catalog.count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'in_progress') AS in_progress,"
        "   pg_catalog.count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'completed'"
        "                      AND result_expires_at OPERATOR(pg_catalog.>) $1) AS completed,"
        "   pg_catalog.count(*) FILTER (WHERE state OPERATOR(pg_catalog.=) 'completed'"
        "                      AND result_expires_at OPERATOR(pg_catalog.<=) $1) AS tombstones"
        "  FROM whizbang.wh_idempotency_keys) k"
        " CROSS JOIN LATERAL (VALUES ('idempotency_in_progress', k.in_progress), ('idempotency_completed', k.completed),"
        "                            ('idempotency_tombstones', k.tombstones)) AS m(metric, value)",
    queue_counts_types());

// The dedup and idempotency metrics as aggregates Citus runs on every shard.
CachedPlan distributed_keys_plan(
    "SELECT (SELECT pg_catalog.count(*) FROM whizbang.wh_message_deduplication),"
    "  (SELECT COALESCE(pg_catalog.sum(observation_count OPERATOR(pg_catalog.-) 1"
    "                                  OPERATOR(pg_catalog.-) conflict_count), 0)::pg_catalog.int8"
    "     FROM whizbang.wh_message_deduplication),"
    "  (SELECT COALESCE(pg_catalog.sum(conflict_count), 0)::pg_catalog.int8 FROM whizbang.wh_message_deduplication),"
    "  (SELECT pg_catalog.count(*) FROM whizbang.wh_idempotency_keys WHERE state OPERATOR(pg_catalog.=) 'in_progress'),"
    "  (SELECT pg_catalog.count(*) FROM whizbang.wh_idempotency_keys WHERE state OPERATOR(pg_catalog.=) 'completed'"
    "      AND result_expires_at OPERATOR(pg_catalog.>) $1),"
    "  (SELECT pg_catalog.count(*) FROM whizbang.wh_idempotency_keys WHERE state OPERATOR(pg_catalog.=) 'completed'"
    "      AND result_expires_at OPERATOR(pg_catalog.<=) $1)",
    {TIMESTAMPTZOID});

// Through the parent, pruned to the records before $1 (the legacy generation's end): a role
// granted SELECT on the dedup table (grant_admin's monitor) holds nothing on its generations.
CachedPlan oldest_legacy_plan("SELECT pg_catalog.min(d.first_seen_at) FROM whizbang.wh_message_deduplication d"
                              " WHERE d.first_seen_at OPERATOR(pg_catalog.<) $1",
                              {TIMESTAMPTZOID});

// The throughput counters' totals per source (counters.h), through whizbang.counters(), which
// adds up every node's on a Citus coordinator. Absent (a database not updated to 0.16.0): zeros.
CachedPlan counter_totals_plan(
    "SELECT c.source,"
    "  COALESCE(pg_catalog.sum(c.stored), 0)::pg_catalog.int8, COALESCE(pg_catalog.sum(c.claimed), 0)::pg_catalog.int8,"
    "  COALESCE(pg_catalog.sum(c.completed), 0)::pg_catalog.int8, COALESCE(pg_catalog.sum(c.failed), 0)::pg_catalog.int8,"
    "  COALESCE(pg_catalog.sum(c.dead_lettered), 0)::pg_catalog.int8"
    "  FROM whizbang.counters() c GROUP BY c.source",
    {});

using Metrics = std::vector<std::pair<std::string, int64_t>>;

// Appends (metric, value) rows to stats()' result; unknown[i]: row i's value is NULL.
void put_metrics(ReturnSetInfo* rsinfo, const Metrics& metrics, const std::vector<bool>& unknown = {}) {
    std::vector<Datum> texts;
    for (const auto& m : metrics) texts.push_back(text_datum(m.first));
    pg_call([&] {
        for (std::size_t i = 0; i < metrics.size(); ++i) {
            Datum values[2] = {texts[i], Int64GetDatum(metrics[i].second)};
            bool nulls[2] = {false, i < unknown.size() && unknown[i]};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
    });
}

// stats()' table metrics on a distributed install, in the single server's order: the work
// metrics from every shard's queues() (routed_queue_counts), the key metrics from aggregates.
// Not one snapshot: each shard and each aggregate counts at its own moment.
void distributed_table_metrics(ReturnSetInfo* rsinfo, TimestampTz now) {
    Metrics metrics;
    // A node that cannot be reached is counted (nodes_unreachable), not an error: stats() is
    // what an operator reads when a node is down. The key metrics then come from no node (NULL).
    int unreachable = 0;
    const std::vector<QueueCounts> counts = routed_queue_counts(now, &unreachable);
    for (const char* source : {"inbox", "outbox"}) {
        int64_t pending = 0, leased = 0, scheduled = 0, dead = 0, oldest = 0;
        for (const QueueCounts& q : counts) {
            if (q.source != source) continue;
            pending += q.pending;
            leased += q.leased;
            scheduled += q.scheduled;
            dead += q.dead_lettered;
            oldest = std::max(oldest, q.oldest_pending_seconds);
        }
        const std::string s(source);
        metrics.insert(metrics.end(), {{s + "_pending", pending}, {s + "_leased", leased}, {s + "_scheduled", scheduled},
                                       {s + "_dead_lettered", dead}, {s + "_oldest_pending_seconds", oldest}});
    }
    const char* names[] = {"dedup_rows", "dedup_duplicates_observed", "dedup_conflicts_observed",
                           "idempotency_in_progress", "idempotency_completed", "idempotency_tombstones"};
    std::vector<bool> unknown(metrics.size(), false);
    if (unreachable == 0) {
        // As the owner, like the routed parts (the entry checked the caller's SELECT on the
        // counted tables): Citus would not let the caller read placements that the owner's
        // routed work changed earlier in the same transaction (25001).
        AsExtensionOwner owner;
        distributed_keys_plan.execute({TimestampTzGetDatum(now)});
        for (int c = 0; c < 6; ++c) {
            bool isnull = false;
            Datum d = spi_value(0, c + 1, &isnull);
            metrics.emplace_back(names[c], isnull ? 0 : DatumGetInt64(d));
            unknown.push_back(false);
        }
    } else {
        for (const char* name : names) {
            metrics.emplace_back(name, 0);
            unknown.push_back(true);
        }
    }
    metrics.emplace_back("nodes_unreachable", unreachable);
    unknown.push_back(false);
    if (unreachable > 0)
        pg_call([&] {
            ereport(NOTICE, (errmsg("whizbang: stats() could not reach %d node(s); their counts are missing, the key "
                                    "metrics are NULL", unreachable)));
        });
    put_metrics(rsinfo, metrics, unknown);
}

}  // namespace
}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// stats() RETURNS TABLE(metric text, value bigint)
WB_ROUTED_FUNCTION(wb_stats, every_node) {
    require_privileges("stats");
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    SpiConnection spi;
    const TimestampTz now = GetCurrentTransactionStartTimestamp();
    if (must_route())
        distributed_table_metrics(rsinfo, now);
    else
        spi_rows_to_result(rsinfo, stats_plan.execute(queue_counts_params(now)));
    // The lease store (DESIGN §3.8): which one runs, and the shared table's capacity and use.
    const shm::Usage u = shm::usage();
    const WaitCounts w = wait_counts();
    const std::pair<const char*, int64_t> store[] = {{"lease_store_shared_memory", shared_leases_active() ? 1 : 0},
                                                     {"lease_store_capacity", u.max_leases},
                                                     {"lease_store_entries", u.in_use},
                                                     {"lease_store_full_claims", u.short_claims},
                                                     // held by prepared transactions not yet ended
                                                     {"lease_store_prepared", u.prepared},
                                                     // claim_work's p_wait (issue 12): claims sleeping now,
                                                     // and waiters woken by commits since the server started.
                                                     {"claim_waiting", w.waiting},
                                                     {"claim_wakeups", w.wakeups}};
    // Dedup generations (DESIGN §3.6): how many, and the age of the oldest one's start (of its
    // oldest record for the records an upgrade attached, which start at MINVALUE); 0 and 0 on a
    // table that is not in generations.
    int64_t generations = 0, oldest_seconds = 0;
    if (!must_route() && dedup_in_generations()) {
        const std::vector<GenerationBound> bounds = list_generations();
        generations = static_cast<int64_t>(bounds.size());
        if (!bounds.empty()) {
            TimestampTz oldest = bounds.front().start;
            if (oldest == INT64_MIN) {
                oldest_legacy_plan.execute({TimestampTzGetDatum(bounds.front().end)});
                bool isnull = false;
                Datum d = spi_value(0, 1, &isnull);
                oldest = isnull ? now : DatumGetTimestampTz(d);
            }
            oldest_seconds = std::max<int64_t>(0, (now - oldest) / USECS_PER_SEC);
        }
    }
    // The WAL outbox's slots (DESIGN §3.10), on the server stats() runs on.
    const LogicalSlots slots = logical_slots();
    const std::pair<const char*, int64_t> dedup[] = {{"dedup_generations", generations},
                                                     {"dedup_oldest_generation_seconds", oldest_seconds},
                                                     {"logical_slots", slots.valid},
                                                     {"logical_slots_lost", slots.invalidated},
                                                     {"logical_slot_max_lag_bytes", slots.max_lag_bytes},
                                                     {"logical_slot_max_retained_wal_bytes", slots.max_retained_bytes}};
    Metrics server(std::begin(store), std::end(store));
    server.insert(server.end(), std::begin(dedup), std::end(dedup));
    // Throughput since the server started (issue 33 item 6): monotonic, for rate().
    server.emplace_back("counters_active", counters_active() ? 1 : 0);
    int64_t sums[2][core::kCounters] = {};
    if (whizbang_table_exists("counters")) {  // the view of 0.16.0: counters() is there
        AsExtensionOwner owner;
        const uint64 rows = counter_totals_plan.execute({});
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false;
            const int s = text_from_datum(spi_value(r, 1, &isnull)) == "outbox" ? 1 : 0;
            for (std::size_t c = 0; c < core::kCounters; ++c) sums[s][c] = DatumGetInt64(spi_value(r, c + 2, &isnull));
        }
    }
    for (int s = 0; s < 2; ++s)
        for (std::size_t c = 0; c < core::kCounters; ++c)
            server.emplace_back(std::string(s == 0 ? "counters_inbox_" : "counters_outbox_") + core::kCounterNames[c],
                                sums[s][c]);
    put_metrics(rsinfo, server);
    spi.finish();
    return (Datum)0;
}
