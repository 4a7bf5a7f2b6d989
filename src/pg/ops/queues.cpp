// queues(p_now) (issue 13 item 7): stats()' work metrics per source and consumer.
//
// Each unprocessed work row joined with its message is pending (due, not under a live lease;
// rows waiting behind their stream's head included), leased (lease_expiry > now) or scheduled
// (not due yet, not leased): the definitions of stats(), which sums these rows per source
// (stats.cpp), so the two cannot disagree. Outbox rows have no consumer: NULL, as claim_work
// and wh_dead_letters give it.
#include <algorithm>
#include <map>

#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/citus/citus_route.h"
#include "pg/lease/lease_store.h"
#include "pg/ops/queues.h"
#include "pg/boundary/spi.h"
#include "pg/boundary/required_privileges.h"

namespace whizbang::pg {
namespace {

// One source's work rows grouped by consumer; `consumer` is the column to report.
std::string work_counts(const char* source, const char* work, const char* messages, const char* stored_at,
                        const char* join, const char* consumer) {
    const std::string pending = "w.scheduled_for OPERATOR(pg_catalog.<=) $1 AND NOT w.leased";
    return std::string("SELECT '") + source + "'::pg_catalog.text AS source, " + consumer + " AS consumer,"
           "  pg_catalog.count(*) FILTER (WHERE " + pending + ") AS pending,"
           "  pg_catalog.count(*) FILTER (WHERE w.leased) AS leased,"
           "  pg_catalog.count(*) FILTER (WHERE w.scheduled_for OPERATOR(pg_catalog.>) $1 AND NOT w.leased) AS scheduled,"
           "  0::pg_catalog.int8 AS dead_lettered,"
           "  pg_catalog.min(m." + stored_at + ") FILTER (WHERE " + pending + ") AS oldest"
           "  FROM (SELECT w.*,"
           "               COALESCE(COALESCE(sl.lease_expiry, w.lease_expiry) OPERATOR(pg_catalog.>) $1, false) AS leased"
           "          FROM " + work + " w LEFT JOIN " + lease_relation(2) +
           "            ON sl.source OPERATOR(pg_catalog.=) '" + source + "'"
           "           AND sl.message_id OPERATOR(pg_catalog.=) w.message_id"
           "           AND sl.consumer COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.=) w.consumer"
           "         WHERE w.processed_at IS NULL) w"
           "  JOIN " + messages + " m ON " + join +
           " GROUP BY w.consumer";
}

}  // namespace

std::string queue_counts_sql() {
    return "SELECT c.source, c.consumer,"
           "  pg_catalog.sum(c.pending)::pg_catalog.int8 AS pending,"
           "  pg_catalog.sum(c.leased)::pg_catalog.int8 AS leased,"
           "  pg_catalog.sum(c.scheduled)::pg_catalog.int8 AS scheduled,"
           "  pg_catalog.sum(c.dead_lettered)::pg_catalog.int8 AS dead_lettered,"
           "  COALESCE(pg_catalog.floor(pg_catalog.date_part('epoch', $1 OPERATOR(pg_catalog.-) pg_catalog.min(c.oldest))),"
           "           0)::pg_catalog.int8 AS oldest_pending_seconds"
           " FROM (" +
           work_counts("inbox", "whizbang.wh_inbox", "whizbang.wh_inbox/*message*/", "received_at",
                       "m.message_id OPERATOR(pg_catalog.=) w.message_id AND m.consumer OPERATOR(pg_catalog.=) w.consumer",
                       "w.consumer::pg_catalog.text") +
           " UNION ALL " +
           work_counts("outbox", "whizbang.wh_outbox", "whizbang.wh_outbox/*message*/", "created_at",
                       "m.message_id OPERATOR(pg_catalog.=) w.message_id",
                       "NULL::pg_catalog.text COLLATE pg_catalog.\"C\"") +
           " UNION ALL "
           "SELECT d.source, d.consumer::pg_catalog.text, 0, 0, 0, pg_catalog.count(*), NULL::pg_catalog.timestamptz"
           "  FROM whizbang.wh_dead_letters d GROUP BY d.source, d.consumer) c"
           " GROUP BY c.source, c.consumer"
           " ORDER BY c.source, c.consumer";
}

std::vector<Oid> queue_counts_types() {
    std::vector<Oid> types{TIMESTAMPTZOID};
    for (Oid t : lease_param_types()) types.push_back(t);
    return types;
}

std::vector<Datum> queue_counts_params(TimestampTz now) {
    std::vector<Datum> values{TimestampTzGetDatum(now)};
    for (Datum d : lease_params(std::nullopt)) values.push_back(d);
    return values;
}

namespace {
CachedPlan queues_plan(queue_counts_sql(), queue_counts_types());
}  // namespace

std::vector<QueueCounts> routed_queue_counts(TimestampTz now, int* unreachable) {
    std::map<std::pair<std::string, std::optional<std::string>>, QueueCounts> merged;
    for (int anchor : routing_anchors()) {
        uint64 rows = 0;
        if (unreachable == nullptr) {
            rows = routed_call(anchor, "queues", {TIMESTAMPTZOID}, {TimestampTzGetDatum(now)}, {' '});
        } else if (std::optional<uint64> got =
                       routed_call_if_reachable(anchor, "queues", {TIMESTAMPTZOID}, {TimestampTzGetDatum(now)}, {' '})) {
            rows = *got;
        } else {
            ++*unreachable;
            continue;
        }
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false, no_consumer = false;
            std::string source = text_from_datum(spi_value(r, 1, &isnull));
            Datum c = spi_value(r, 2, &no_consumer);
            std::optional<std::string> consumer;
            if (!no_consumer) consumer = text_from_datum(c);
            QueueCounts& q = merged[{source, consumer}];
            q.source = source;
            q.consumer = consumer;
            auto num = [&](int col) {
                bool n = false;
                Datum d = spi_value(r, col, &n);
                return n ? int64_t{0} : DatumGetInt64(d);
            };
            q.pending += num(3);
            q.leased += num(4);
            q.scheduled += num(5);
            q.dead_lettered += num(6);
            q.oldest_pending_seconds = std::max(q.oldest_pending_seconds, num(7));
        }
    }
    std::vector<QueueCounts> out;
    for (auto& [key, q] : merged) out.push_back(q);  // std::map order: source, then consumer (NULL first)
    return out;
}

}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// queues(p_now) RETURNS TABLE(source, consumer, pending, leased, scheduled, dead_lettered,
// oldest_pending_seconds)
WB_ROUTED_FUNCTION(wb_queues, every_node) {
    const TimestampTz now = timestamptz_arg(fcinfo, 0, "p_now");
    require_privileges("queues");
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    SpiConnection spi;
    if (must_route()) {
        std::vector<QueueCounts> counts = routed_queue_counts(now);
        std::vector<Datum> texts;
        for (const QueueCounts& q : counts) {
            texts.push_back(text_datum(q.source));
            texts.push_back(q.consumer ? text_datum(*q.consumer) : (Datum)0);
        }
        pg_call([&] {
            for (std::size_t i = 0; i < counts.size(); ++i) {
                const QueueCounts& q = counts[i];
                Datum values[7] = {texts[2 * i], texts[2 * i + 1], Int64GetDatum(q.pending), Int64GetDatum(q.leased),
                                   Int64GetDatum(q.scheduled), Int64GetDatum(q.dead_lettered),
                                   Int64GetDatum(q.oldest_pending_seconds)};
                bool nulls[7] = {false, !q.consumer, false, false, false, false, false};
                tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
            }
        });
        spi.finish();
        return (Datum)0;
    }
    uint64 rows = queues_plan.execute(queue_counts_params(now));
    spi_rows_to_result(rsinfo, rows);
    spi.finish();
    return (Datum)0;
}
