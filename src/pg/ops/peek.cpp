// peek (issue 13 item 7): the pending messages, as claim_work would hand them out, read
// without leasing or locking them.
//
// A plain snapshot read: no row locks, no writes, attempts unchanged; a concurrent claim is
// neither blocked nor changed. "Pending" is stats()' and queues()' definition (due, not under
// a live lease, unprocessed), so an unlimited peek returns queues()' pending rows exactly.
//
// Order: the order one claim taking everything would follow, earliest due first, a stream's
// rows in arrival order. A streamed row cannot go before an older row of its stream, so it
// sorts by its "ready" time: the latest scheduled_for of the unfinished rows of its stream up
// to itself (a running max, non-decreasing along the stream); ties keep the stream's order.
#include <algorithm>

#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/store/dedup.h"
#include "pg/citus/citus_route.h"
#include "pg/lease/lease_store.h"
#include "pg/boundary/spi.h"
#include "pg/claim/work.h"
#include "pg/boundary/required_privileges.h"

namespace whizbang::pg {
namespace {

// A row's lease from either store (lease_store.h): its expiry and its deliveries so far.
const std::string kLease =
    " COALESCE(sl.lease_expiry, w.lease_expiry) AS held_until, COALESCE(sl.attempts, w.attempts) AS deliveries";
std::string lease_join(const char* source) {
    return " LEFT JOIN " + lease_relation(4) + " ON sl.source OPERATOR(pg_catalog.=) '" + source + "'" +
           " AND sl.message_id OPERATOR(pg_catalog.=) w.message_id"
           " AND sl.consumer COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.=) w.consumer";
}

// One source's unfinished rows with their message and ready time (the pending filter comes
// after the window: an older row that is leased or not due still holds its followers back).
// $2 (the consumer, NULL: all) selects inbox rows only, as in claim_work.
const std::string inbox_rows =
    "SELECT 'inbox'::pg_catalog.text AS source, w.message_id, w.stream_id, w.partition_number, m.handler_name,"
    "       NULL::pg_catalog.text AS destination, m.message_type, m.envelope, m.metadata, m.scope, w.deliveries,"
    "       w.consumer::pg_catalog.text AS consumer, w.scheduled_for, w.held_until, w.last_error, w.ready,"
    "       w.stream_seq"
    "  FROM (SELECT w.*, CASE WHEN w.stream_id IS NULL THEN w.scheduled_for"
    "               ELSE pg_catalog.max(w.scheduled_for) OVER (PARTITION BY w.consumer, w.stream_id"
    "                                                         ORDER BY w.stream_seq) END AS ready," + kLease +
    "          FROM whizbang.wh_inbox w" + lease_join("inbox") +
    "         WHERE w.processed_at IS NULL"
    "           AND ($2::pg_catalog.text IS NULL OR w.consumer OPERATOR(pg_catalog.=) $2)) w"
    "  JOIN whizbang.wh_inbox/*message*/ m"
    "    ON m.message_id OPERATOR(pg_catalog.=) w.message_id AND m.consumer OPERATOR(pg_catalog.=) w.consumer";
const std::string outbox_rows =
    "SELECT 'outbox'::pg_catalog.text AS source, w.message_id, w.stream_id, w.partition_number,"
    "       NULL::pg_catalog.text AS handler_name, m.destination, m.message_type, m.event_data AS envelope,"
    "       m.metadata, m.scope, w.deliveries, NULL::pg_catalog.text COLLATE pg_catalog.\"C\" AS consumer,"
    "       w.scheduled_for, w.held_until, w.last_error, w.ready, w.stream_seq"
    "  FROM (SELECT w.*, CASE WHEN w.stream_id IS NULL THEN w.scheduled_for"
    "               ELSE pg_catalog.max(w.scheduled_for) OVER (PARTITION BY w.stream_id ORDER BY w.stream_seq)"
    "               END AS ready," + kLease +
    "          FROM whizbang.wh_outbox w" + lease_join("outbox") + " WHERE w.processed_at IS NULL) w"
    "  JOIN whizbang.wh_outbox/*message*/ m ON m.message_id OPERATOR(pg_catalog.=) w.message_id";

// The pending rows of `rows` in claim order. $1 now, $2 consumer, $3 limit. One statement per
// source selection, so a role granted one source's tables can peek at that source.
std::string peek_sql(const std::string& rows) {
    return "SELECT p.source, p.message_id, p.stream_id, p.partition_number, p.handler_name, p.destination,"
           "       p.message_type, p.envelope, p.metadata, p.scope, p.deliveries, p.consumer, p.scheduled_for,"
           "       p.held_until, p.last_error"
           "  FROM (" + rows + ") p"
           " WHERE p.scheduled_for OPERATOR(pg_catalog.<=) $1"
           "   AND (p.held_until IS NULL OR p.held_until OPERATOR(pg_catalog.<=) $1)"
           " ORDER BY p.ready, p.source, p.consumer, p.stream_id, p.stream_seq, p.message_id"
           " LIMIT $3";
}

// Indexed by Source; [2]: both sources.
std::vector<Oid> peek_types() {
    std::vector<Oid> types{TIMESTAMPTZOID, TEXTOID, INT4OID};
    for (Oid t : lease_param_types()) types.push_back(t);
    return types;
}
CachedPlan peek_plans[3] = {CachedPlan(peek_sql(inbox_rows), peek_types()), CachedPlan(peek_sql(outbox_rows), peek_types()),
                            CachedPlan(peek_sql(inbox_rows + " UNION ALL " + outbox_rows), peek_types())};

}  // namespace
}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// peek(p_source, p_consumer, p_limit, p_now) RETURNS TABLE(source, message_id, stream_id,
// partition_number, handler_name, destination, message_type, envelope, metadata, scope, attempts,
// consumer, scheduled_for, lease_expiry, last_error)
WB_ROUTED_FUNCTION(wb_peek, every_node) {
    const std::optional<Source> source = source_arg(fcinfo, 0, true);
    std::optional<std::string> consumer;
    if (!PG_ARGISNULL(1)) consumer = consumer_arg(fcinfo, 1);
    const int limit = positive_int_arg(fcinfo, 2, "p_limit");
    const TimestampTz now = timestamptz_arg(fcinfo, 3, "p_now");
    CallShape shape;  // one source, or both
    shape.inbox = !source || *source == Source::inbox;
    shape.outbox = !source || *source == Source::outbox;
    require_privileges("peek", shape);
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    SpiConnection spi;
    if (must_route()) {
        // Each shard's pending rows in claim order, merged by due time (scheduled_for): exact
        // within a shard, by due time across shards; the first p_limit.
        std::vector<RoutedRow> rows = call_on_every_shard(fcinfo, "peek");
        constexpr int kScheduledFor = 12;  // 0-based column of the result
        std::stable_sort(rows.begin(), rows.end(), [](const RoutedRow& a, const RoutedRow& b) {
            return DatumGetTimestampTz(a.values[kScheduledFor]) < DatumGetTimestampTz(b.values[kScheduledFor]);
        });
        if (rows.size() > static_cast<std::size_t>(limit)) rows.resize(limit);
        for (std::size_t i = 0; i < rows.size(); ++i) rows[i].position = i;
        put_in_order(rsinfo, rows);
        spi.finish();
        return (Datum)0;
    }
    const std::string nulls = std::string(" ") + (consumer ? ' ' : 'n') + std::string(1 + kLeaseParams, ' ');
    std::vector<Datum> values{TimestampTzGetDatum(now), consumer ? text_datum(*consumer) : (Datum)0, Int32GetDatum(limit)};
    for (Datum d : lease_params(source)) values.push_back(d);
    uint64 rows = peek_plans[source ? static_cast<int>(*source) : 2].execute(values, nulls.c_str());
    spi_rows_to_result(rsinfo, rows);
    spi.finish();
    return (Datum)0;
}
