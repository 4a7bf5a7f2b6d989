// stats() (DESIGN §3.7): one row per metric, counted now, in one statement (one snapshot), so
// the figures agree with each other. Exact counts: the work tables are meant to stay small;
// on a big dedup table the dedup_* metrics cost a scan of it.
#include "pg/args.h"
#include "pg/arrays.h"
#include "pg/spi.h"

namespace whizbang::pg {
namespace {

// The five work metrics of one source, as (metric, value) rows; `@` is the source's prefix.
// pending: due and not under a live lease (includes rows waiting behind their stream's head);
// leased: under a live lease; scheduled: not due yet (a retry, or ScheduledFor), not leased;
// oldest_pending_seconds: how long the oldest pending message has been stored.
std::string work_metrics(const char* source, const char* work, const char* messages, const char* stored_at,
                         const char* join) {
    const std::string s(source);
    return std::string("SELECT m.metric, m.value FROM (SELECT"
                       "  pg_catalog.count(*) FILTER (WHERE w.scheduled_for OPERATOR(pg_catalog.<=) $1 AND NOT leased) AS pending,"
                       "  pg_catalog.count(*) FILTER (WHERE leased) AS leased,"
                       "  pg_catalog.count(*) FILTER (WHERE w.scheduled_for OPERATOR(pg_catalog.>) $1 AND NOT leased) AS scheduled,"
                       "  COALESCE(pg_catalog.floor(pg_catalog.date_part('epoch', $1 OPERATOR(pg_catalog.-)"
                       "      pg_catalog.min(m.") + stored_at + ") FILTER (WHERE w.scheduled_for OPERATOR(pg_catalog.<=) $1 AND NOT leased))),"
                       "    0)::pg_catalog.int8 AS oldest"
                       "  FROM (SELECT w.*, COALESCE(w.lease_expiry OPERATOR(pg_catalog.>) $1, false) AS leased"
                       "          FROM " + work + " w WHERE w.processed_at IS NULL) w"
                       "  JOIN " + messages + " m ON " + join + ") c"
                       " CROSS JOIN LATERAL (VALUES ('" + s + "_pending', c.pending), ('" + s + "_leased', c.leased),"
                       "   ('" + s + "_scheduled', c.scheduled),"
                       "   ('" + s + "_dead_lettered', (SELECT pg_catalog.count(*) FROM whizbang.wh_dead_letters d"
                       "                                 WHERE d.source OPERATOR(pg_catalog.=) '" + s + "')),"
                       "   ('" + s + "_oldest_pending_seconds', c.oldest)) AS m(metric, value)";
}

CachedPlan stats_plan(
    work_metrics("inbox", "whizbang.wh_inbox_work", "whizbang.wh_inbox", "received_at",
                 "m.message_id OPERATOR(pg_catalog.=) w.message_id AND m.consumer OPERATOR(pg_catalog.=) w.consumer") +
        " UNION ALL " +
        work_metrics("outbox", "whizbang.wh_outbox_work", "whizbang.wh_outbox", "created_at",
                     "m.message_id OPERATOR(pg_catalog.=) w.message_id") +
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
    {TIMESTAMPTZOID});

}  // namespace
}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// stats() RETURNS TABLE(metric text, value bigint)
WB_FUNCTION(wb_stats) {
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    SpiConnection spi;
    const TimestampTz now = GetCurrentTransactionStartTimestamp();
    uint64 rows = stats_plan.execute({TimestampTzGetDatum(now)});
    spi_rows_to_result(rsinfo, rows);
    spi.finish();
    return (Datum)0;
}
