// claim_work (DESIGN §3.4) for the inbox and the outbox: its arguments, waiting and routing; the
// claim itself is claim_engine.cpp's, over the lease store in use. Shared helpers of the work
// functions.
//
// Locking rules that keep callers from waiting on each other or deadlocking:
//  - claim_work only ever locks with SKIP LOCKED, so it never waits;
//  - complete / fail / renew / release lock the rows they name sorted by message id, so two
//    of them over overlapping ids wait for each other at most.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "core/backoff.h"
#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/store/dedup.h"
#include "pg/lease/lease_store.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/claim/work.h"
#include "pg/claim/retry_policies.h"
#include "pg/ops/counters.h"

#include "pg/boundary/owner.h"
#include "pg/citus/citus_route.h"
#include "pg/citus/claim_memory.h"
#include "pg/citus/shard_scope.h"
#include "pg/wait/work_wait.h"
#include "pg/boundary/required_privileges.h"

namespace whizbang::pg {
namespace {

// Moves work to wh_dead_letters in one statement (atomic with the caller): one row, message and
// work state alike, is deleted and copied.
const char* const kDeleteWork =
    "WITH u AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3))"
    "           AS u(id, consumer, error)),"
    " m AS (DELETE FROM whizbang.wh_inbox m USING u"
    "        WHERE m.message_id OPERATOR(pg_catalog.=) u.id AND m.consumer OPERATOR(pg_catalog.=) u.consumer"
    "       RETURNING m.*, COALESCE(u.error, m.last_error) AS error)";
// The same in the split layout (before 0.14.0): the work row goes, then its message, which
// returns the work row's attempts and error along.
const char* const kDeleteSplitWork =
    "WITH u AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3))"
    "           AS u(id, consumer, error)),"
    " w AS (DELETE FROM whizbang.wh_inbox w USING u"
    "        WHERE w.message_id OPERATOR(pg_catalog.=) u.id AND w.consumer OPERATOR(pg_catalog.=) u.consumer"
    "       RETURNING w.message_id, w.consumer, w.attempts, COALESCE(u.error, w.last_error) AS error),"
    " m AS (DELETE FROM whizbang.wh_inbox/*message*/ m USING w"
    "        WHERE m.message_id OPERATOR(pg_catalog.=) w.message_id AND m.consumer OPERATOR(pg_catalog.=) w.consumer"
    "       RETURNING m.*, w.attempts, w.error)";
// `sharded`: inside a routed call on a Citus node (shard_scope.h). A shard has no identity
// default, so the id is made there: the node's group id in the top 16 bits and the node's own
// sequence below, unique across the cluster as Citus makes its bigint identities.
std::string dead_letter_sql(Source source, bool sharded, bool split) {
    const char* head = split ? kDeleteSplitWork : kDeleteWork;
    std::string sql = source == Source::inbox ? std::string(head) : outbox_twin(head);
    if (split && source == Source::outbox) {  // the outbox's message table has no consumer column there
        const std::string by_consumer = " AND m.consumer OPERATOR(pg_catalog.=) w.consumer";
        sql.erase(sql.find(by_consumer), by_consumer.size());
    }
    sql += " INSERT INTO whizbang.wh_dead_letters (";
    if (sharded) sql += "dead_letter_id, ";
    sql += "source, consumer, message_id, handler_name, destination, message_type,"
           "  envelope, metadata, scope, stream_id, is_event, sent_at, received_at, attempts, last_error, dead_lettered_at";
    sql += sharded ? ", partition_number) SELECT " : ") SELECT ";
    if (sharded)
        sql += "((SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)::pg_catalog.int8 OPERATOR(pg_catalog.<<) 48)"
               " OPERATOR(pg_catalog.|) pg_catalog.nextval('whizbang.wh_dead_letters_dead_letter_id_seq'), ";
    sql += source == Source::inbox
               ? "'inbox', m.consumer, m.message_id, m.handler_name, NULL, m.message_type, m.envelope,"
                 "       m.metadata, m.scope, m.stream_id, m.is_event, m.sent_at, m.received_at, m.attempts, m.error, $4"
               : "'outbox', NULL, m.message_id, NULL, m.destination, m.message_type, m.event_data,"
                 "       m.metadata, m.scope, m.stream_id, m.is_event, NULL, m.created_at, m.attempts, m.error, $4";
    // The dead letter's partition: its message's.
    if (sharded) sql += ", m.partition_number";
    sql += "  FROM m";
    return sql;
}
CachedPlan dead_letter_plan(Source source, bool sharded) {
    CachedPlan plan(dead_letter_sql(source, sharded, false), {UUIDARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID});
    plan.split_as(split_twin(dead_letter_sql(source, sharded, true)));
    return plan;
}
CachedPlan dead_letter_plans[2][2] = {{dead_letter_plan(Source::inbox, false), dead_letter_plan(Source::inbox, true)},
                                      {dead_letter_plan(Source::outbox, false), dead_letter_plan(Source::outbox, true)}};

}  // namespace

const char* source_name(Source source) { return source == Source::inbox ? "inbox" : "outbox"; }

std::optional<Source> source_arg(FunctionCallInfo fcinfo, int argno, bool allow_null) {
    if (PG_ARGISNULL(argno)) {
        if (allow_null) return std::nullopt;
        require_not_null(fcinfo, argno, "p_source");
    }
    std::string source = text_arg(fcinfo, argno, "p_source");
    if (source == "inbox") return Source::inbox;
    if (source == "outbox") {
        if (!outbox_installed())
            throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED,
                           "the outbox is not installed in this database: its whizbang is older than 0.4.0", {},
                           "Run ALTER EXTENSION whizbang UPDATE.");
        return Source::outbox;
    }
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "p_source must be 'inbox' or 'outbox', got " + core::quoted_excerpt(source));
}

bool outbox_installed() { return OidIsValid(work_table(Source::outbox)); }

int64_t next_lease_token() {
    // A routed call: the coordinator's token, the same on every node of the call.
    if (const int64_t routed = shard_scope_token(); routed > 0) return routed;
    if (shared_leases_active()) return shm::next_token();
    static CachedPlan plan("SELECT pg_catalog.nextval('whizbang.wh_lease_token_seq')", {});
    plan.execute({});
    bool isnull = false;
    return DatumGetInt64(spi_value(0, 1, &isnull));
}

Oid work_table(Source source) {
    return pg_call([source] {
        Oid schema = get_namespace_oid("whizbang", true);
        return OidIsValid(schema) ? whizbang_relid_unguarded(source == Source::inbox ? "wh_inbox" : "wh_outbox")
                                  : InvalidOid;
    });
}

StreamCursor& stream_cursor(Source source) {
    static StreamCursor cursors[2];
    return cursors[static_cast<int>(source)];
}

void walk_stream_heads(const Claim& c, CachedPlan& plan, int limit,
                       const std::function<bool(uint64 row, StreamCursor& position)>& row) {
    StreamCursor& cursor = stream_cursor(c.source);
    StreamCursor last;
    int found = 0;
    // From the cursor to the end, then from the start.
    for (int pass = 0; pass < 2 && found < limit; ++pass) {
        const bool from_start = pass == 1 || !cursor.set;
        const char nulls[] = {' ', c.consumer_null, c.partitions_null, ' ', ' ', ' ', from_start ? 'n' : ' ',
                              from_start ? 'n' : ' ', '\0'};
        uint64 rows = plan.execute({TimestampTzGetDatum(c.now), c.consumer, c.partitions, Int32GetDatum(c.partition_count),
                                    Int32GetDatum(limit - found), BoolGetDatum(from_start),
                                    from_start ? (Datum)0 : text_datum(cursor.consumer),
                                    from_start ? (Datum)0 : PointerGetDatum(cursor.stream.data())},
                                   nulls);
        for (uint64 r = 0; r < rows; ++r) {
            if (row(r, last)) ++found;
            last.set = true;
        }
        if (from_start) break;
    }
    cursor = last;  // nothing found: the next claim starts from the beginning
}

std::string stream_walk_sql() {
    return "WITH RECURSIVE streams AS ("
           "  (SELECT w.consumer, w.stream_id FROM whizbang.wh_inbox w"
           "    WHERE w.stream_id IS NOT NULL AND w.processed_at IS NULL"
           "      AND ($2::pg_catalog.text IS NULL OR w.consumer OPERATOR(pg_catalog.=) $2)"
           "      AND ($6 OR (w.consumer, w.stream_id) OPERATOR(pg_catalog.>) ($7::pg_catalog.text COLLATE pg_catalog.\"C\", $8))"
           "    ORDER BY w.consumer, w.stream_id, w.stream_seq LIMIT 1)"
           "  UNION ALL"
           "  SELECT n.consumer, n.stream_id FROM streams s CROSS JOIN LATERAL ("
           "    SELECT w.consumer, w.stream_id FROM whizbang.wh_inbox w"
           "     WHERE w.stream_id IS NOT NULL AND w.processed_at IS NULL"
           "       AND ($2::pg_catalog.text IS NULL OR w.consumer OPERATOR(pg_catalog.=) $2)"
           "       AND (w.consumer, w.stream_id) OPERATOR(pg_catalog.>) (s.consumer, s.stream_id)"
           "     ORDER BY w.consumer, w.stream_id, w.stream_seq LIMIT 1) n)";
}

namespace {
// A memory context current for one look of a waiting claim_work, deleted after it.
class LookMemory {
public:
    LookMemory()
        : context_(pg_call([] { return AllocSetContextCreate(CurrentMemoryContext, "whizbang claim look", ALLOCSET_SMALL_SIZES); })),
          previous_(MemoryContextSwitchTo(context_)) {}
    ~LookMemory() {
        MemoryContextSwitchTo(previous_);
        MemoryContextDelete(context_);
    }
    LookMemory(const LookMemory&) = delete;
    LookMemory& operator=(const LookMemory&) = delete;

private:
    MemoryContext context_, previous_;
};

// When rows of a source become claimable by themselves after $1: the earliest scheduled row
// without a stream (from the due index), the earliest scheduled stream head (the stream walk).
WorkPlan next_due_plan(
    stream_walk_sql() +
    "SELECT LEAST("
    "  (SELECT pg_catalog.min(w.scheduled_for) FROM whizbang.wh_inbox w"
    "    WHERE w.processed_at IS NULL AND w.stream_id IS NULL AND w.scheduled_for OPERATOR(pg_catalog.>) $1"
    "      AND ($2::pg_catalog.text IS NULL OR w.consumer OPERATOR(pg_catalog.=) $2)),"
    "  (SELECT pg_catalog.min(h.scheduled_for) FROM " + stream_heads_from("w.scheduled_for") +
    "    WHERE h.scheduled_for OPERATOR(pg_catalog.>) $1))",
    {TIMESTAMPTZOID, TEXTOID, INT4ARRAYOID, INT4OID, INT4OID, BOOLOID, TEXTOID, UUIDOID});
}  // namespace

TimestampTz next_due_of(Source source, const std::optional<std::string>& consumer, TimestampTz now) {
    const bool by_consumer = source == Source::inbox && consumer;
    TimestampTz due = PG_INT64_MAX;
    {
        SpiConnection spi;
        const char nulls[] = {' ', by_consumer ? ' ' : 'n', 'n', 'n', 'n', ' ', 'n', 'n', '\0'};
        next_due_plan[source].execute({TimestampTzGetDatum(now), by_consumer ? text_datum(*consumer) : (Datum)0, 0, 0, 0,
                                       BoolGetDatum(true), 0, 0},
                                      nulls);
        bool isnull = true;
        Datum d = spi_value(0, 1, &isnull);
        if (!isnull) due = DatumGetTimestampTz(d);
        spi.finish();
    }
    if (shared_leases_active()) {
        std::optional<uint64_t> hash;
        if (by_consumer) hash = shm::consumer_hash(*consumer);
        due = std::min(due, shm::earliest_expiry(source, hash, now));
    }
    return due;
}

std::string stream_heads_from(const std::string& columns) {
    return "streams s CROSS JOIN LATERAL ("
           "    SELECT " + columns +
           "      FROM whizbang.wh_inbox w"
           "     WHERE w.consumer OPERATOR(pg_catalog.=) s.consumer AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id"
           "       AND w.processed_at IS NULL"
           "     ORDER BY w.stream_seq LIMIT 1) h";
}

std::string outbox_twin(const std::string& sql) {
    // The message table and its companions (wh_inbox_streams, wh_inbox_preleased) alike.
    static const std::string from = "whizbang.wh_inbox", to = "whizbang.wh_outbox";
    std::string out = sql;
    for (std::size_t at = out.find(from); at != std::string::npos; at = out.find(from, at + to.size()))
        out.replace(at, from.size(), to);
    return out;
}

uint64_t dead_letter_calls = 0;

void dead_letter(Source source, const std::vector<core::Uuid>& ids, const std::vector<std::string>& consumers,
                 const std::vector<std::optional<std::string>>& errors, TimestampTz now) {
    if (ids.empty()) return;
    ++dead_letter_calls;
    const uint64 moved = dead_letter_plans[static_cast<int>(source)][in_shard_scope() ? 1 : 0].execute(
        {uuid_array(ids), text_array(consumers), nullable_text_array(errors), TimestampTzGetDatum(now)});
    // The rows named are locked by the caller, so all of them moved; should fewer have, the
    // first ones' consumers are counted.
    count_rows(source, core::Counter::dead_lettered, std::min<std::size_t>(ids.size(), moved),
               [&](std::size_t i) { return consumers[i]; });
}

// claim_work on a distributed install: asks the nodes shard by shard (starting at another shard
// each call, so no shard waits behind the others), each for what is still missing of p_max_rows,
// and appends their rows to the result. Returns how many rows it handed out.
int routed_claim(FunctionCallInfo fcinfo, const std::vector<int>* partitions, int max_rows, TimestampTz now) {
    const int nargs = PG_NARGS();
    const std::vector<Oid> types = argument_types(fcinfo);
    SpiConnection spi;
    // (anchor partition, the partitions of that shard asked for; empty: all of them)
    std::vector<std::pair<int, std::vector<int>>> parts;
    if (partitions) {
        for (const auto& [shard, positions] : routing_groups(*partitions)) {
            std::vector<int> mine;
            for (std::size_t i : positions) mine.push_back((*partitions)[i]);
            parts.emplace_back(mine.front(), mine);
        }
    } else {
        for (int anchor : routing_anchors()) parts.emplace_back(anchor, std::vector<int>{});
    }
    // The caller's rights were checked by the entry (the nodes run as the owner); a claim without
    // p_source takes the outbox only where the caller may update it, as on one server.
    std::optional<Datum> only_inbox;
    if (PG_ARGISNULL(1) && !has_table_privilege("wh_outbox", ACL_UPDATE)) only_inbox = text_datum("inbox");
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    const int64_t token = coordinator_lease_token();  // one token for the whole claim, as on one server
    // Each claim starts at another node (and, on a node, another shard) so that none waits
    // behind the others; by the token, so that the same calls meet the same order.
    const std::size_t first = parts.empty() ? 0 : static_cast<std::size_t>(token % static_cast<int64_t>(parts.size()));
    int handed = 0;
    int unreachable = 0;
    for (std::size_t k = 0; k < parts.size() && handed < max_rows; ++k) {
        const auto& [anchor, mine] = parts[(first + k) % parts.size()];
        std::vector<Datum> values;
        std::vector<char> nulls;
        caller_arguments(fcinfo, values, nulls);
        if (only_inbox) {
            values[1] = *only_inbox;
            nulls[1] = ' ';
        }
        values[2] = Int32GetDatum(max_rows - handed);  // p_max_rows
        values[4] = mine.empty() ? (Datum)0 : int4_array(mine);
        nulls[4] = mine.empty() ? 'n' : ' ';
        values[7] = TimestampTzGetDatum(now);  // p_now: the claim's time, the wait included
        nulls[7] = ' ';
        if (nargs > 9) {  // p_wait: the coordinator waits, each node looks once
            values[9] = pg_call([] {
                Interval* zero = static_cast<Interval*>(palloc0(sizeof(Interval)));
                return IntervalPGetDatum(zero);
            });
            nulls[9] = ' ';
        }
        // Without p_partitions a claim takes what the reachable nodes have (docs/scaleout.md).
        uint64 rows = 0;
        if (partitions) {
            rows = routed_call(anchor, "claim_work", types, values, nulls, token);
        } else if (std::optional<uint64> got = routed_call_if_reachable(anchor, "claim_work", types, values, nulls, token)) {
            rows = *got;
        } else {
            ++unreachable;
            continue;
        }
        // The partition of each row handed out: its outcome calls go to its node only.
        for (uint64 r = 0; r < rows; ++r) {
            bool source_null = false, id_null = false, partition_null = false, consumer_null = false;
            Datum source = spi_value(r, 1, &source_null);
            Datum id = spi_value(r, 2, &id_null);
            Datum partition = spi_value(r, 4, &partition_null);
            Datum consumer = spi_value(r, 14, &consumer_null);  // the claim's consumer column
            if (source_null || id_null || partition_null) continue;
            const bool outbox = text_from_datum(source) == "outbox";
            remember_claimed(outbox ? Source::outbox : Source::inbox,
                             outbox || consumer_null ? std::string() : text_from_datum(consumer), uuid_from_datum(id),
                             DatumGetInt32(partition));
        }
        spi_rows_to_result(rsinfo, rows);
        handed += static_cast<int>(rows);
    }
    spi.finish();
    if (unreachable > 0)
        pg_call([&] {
            ereport(NOTICE, (errmsg("whizbang: claim_work could not reach %d of %zu nodes; it claimed from the others",
                                    unreachable, parts.size()),
                             errhint("Claims with p_partitions of the reachable nodes' partitions do not visit the others.")));
        });
    return handed;
}

}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// claim_work(p_instance_id, p_source, p_max_rows, p_lease_seconds, p_partitions, p_partition_count,
//            p_max_per_stream, p_now, p_consumer, p_wait) RETURNS TABLE(source, message_id, ...)
// (a database still at 0.6.0 calls it without p_wait)
WB_ROUTED_FUNCTION(wb_claim_work, by_partition) {
    require_not_null(fcinfo, 0, "p_instance_id");
    Claim c;
    c.instance = uuid_from_datum(PG_GETARG_DATUM(0));
    const std::optional<Source> source = source_arg(fcinfo, 1, true);
    c.max_rows = positive_int_arg(fcinfo, 2, "p_max_rows");
    const int lease_seconds = positive_int_arg(fcinfo, 3, "p_lease_seconds");
    c.partition_count = positive_int_arg(fcinfo, 5, "p_partition_count");
    c.max_per_stream = positive_int_arg(fcinfo, 6, "p_max_per_stream");
    const TimestampTz p_now = timestamptz_arg(fcinfo, 7, "p_now");
    std::optional<std::string> consumer;
    if (!PG_ARGISNULL(8)) consumer = consumer_arg(fcinfo, 8);
    std::vector<int> partitions;
    if (!PG_ARGISNULL(4)) {
        ArrayType* a = array_arg(fcinfo, 4, "p_partitions", INT4OID);
        if (pg_call([&] { return array_contains_nulls(a); }))
            throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "p_partitions must not contain nulls");
        c.partitions = PointerGetDatum(a);
        c.partitions_null = ' ';
        partitions = int4_array_values(PointerGetDatum(a));
    }
    int64_t wait_us = 0;
    if (PG_NARGS() > 9) {  // a database still at 0.6.0 calls without p_wait
        require_not_null(fcinfo, 9, "p_wait");
        wait_us = *interval_arg(fcinfo, 9, "p_wait");
    }
    if (wait_us < 0) throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "p_wait must not be negative");
    // A snapshot held for the whole transaction never sees the work a wait is for: a worker
    // looping on such a "wait" would spin. Refused rather than answered at once.
    if (wait_us > 0 && pg_call([] { return IsolationUsesXactSnapshot(); }))
        throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED, "p_wait needs READ COMMITTED",
                       "This transaction is REPEATABLE READ or SERIALIZABLE: its snapshot never sees work stored after it began.",
                       "Call claim_work with p_wait in its own READ COMMITTED transaction (autocommit), or pass p_wait => '0'.");
    const int64_t lease_us = static_cast<int64_t>(lease_seconds) * USECS_PER_SEC;
    (void)add_to_timestamp(p_now, lease_us, "p_now + p_lease_seconds");

    if (shared_leases_active())
        // Shared leases are written to memory only, where a read-only transaction or a standby
        // would hand out leases the primary knows nothing of; the table store's UPDATE refuses
        // the same.
        pg_call([] {
            PreventCommandIfReadOnly("claim_work()");
            PreventCommandDuringRecovery("claim_work()");
        });
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);

    // Both sources: which one fills the claim first alternates between a backend's claims, so
    // a busy inbox cannot starve the outbox or the other way round. One token for the claim.
    // The outbox takes part where it is installed (a database still at 0.3.0 has none) and the
    // calling role may update its work state: an inbox worker granted the inbox only keeps
    // working with the default p_source.
    static unsigned both_claims = 0;
    std::vector<Source> sources;
    if (source) {
        sources = {*source};
    } else {
        const Oid outbox = work_table(Source::outbox);
        const bool with_outbox =
            OidIsValid(outbox) && pg_call([outbox] { return pg_class_aclcheck(outbox, GetUserId(), ACL_UPDATE); }) == ACLCHECK_OK;
        sources = with_outbox ? std::vector<Source>{Source::inbox, Source::outbox} : std::vector<Source>{Source::inbox};
    }
    // What the sources claimed from need (required_privileges.h), checked before anything is
    // claimed, here and on a coordinator alike (whose parts run as the owner on the nodes).
    CallShape shape;
    for (Source s : sources) (s == Source::inbox ? shape.inbox : shape.outbox) = true;
    require_privileges("claim_work", shape);
    const int max_rows = c.max_rows;
    int looks = 0;
    // One look: time passes while a claim waits, so each look is p_now plus the time waited.
    auto try_claim = [&](int64_t elapsed_us) {
        // A waiting call looks many times (every 100 ms when it polls): each look's memory
        // goes when the look is done, not when the call returns.
        std::optional<LookMemory> memory;
        if (looks++ > 0) memory.emplace();
        c.now = add_to_timestamp(p_now, elapsed_us, "p_now + the time waited");
        c.expiry = add_to_timestamp(c.now, lease_us, "p_now + p_lease_seconds");
        c.max_rows = max_rows;
        std::vector<Source> order = sources;
        if (order.size() == 2 && (both_claims++ & 1u) == 1) std::reverse(order.begin(), order.end());
        SpiConnection spi;
        int64_t fresh_token = 0;
        SharedHandOut shared;
        shared.result_desc = rsinfo->setDesc;
        for (Source s : order) {
            c.source = s;
            // p_consumer selects inbox rows; outbox rows have no consumer.
            const bool by_consumer = s == Source::inbox && consumer;
            c.consumer = by_consumer ? text_datum(*consumer) : (Datum)0;
            c.consumer_null = by_consumer ? ' ' : 'n';
            const RetryPolicies policies(s);
            c.max_rows -= shared_leases_active() ? claim_shared(c, policies, shared)
                                                 : claim_rows(c, policies, fresh_token, rsinfo);
            if (c.max_rows <= 0) break;
        }
        finish_shared_claim(shared, rsinfo);
        spi.finish();
        return max_rows - c.max_rows;
    };
    // On a distributed install the coordinator claims shard by shard, each part on the node of
    // its shard (citus_route.h); p_wait polls between looks here (the commits that store work
    // happen on the workers).
    const bool routed = must_route();
    std::function<int(int64_t)> look = try_claim;
    if (routed) {
        require_distributed_partition_count(c.partition_count);
        look = [&](int64_t elapsed_us) {
            std::optional<LookMemory> memory;
            if (looks++ > 0) memory.emplace();
            return routed_claim(fcinfo, PG_ARGISNULL(4) ? nullptr : &partitions, max_rows,
                                add_to_timestamp(p_now, elapsed_us, "p_now + the time waited"));
        };
    }
    if (wait_us == 0) {
        (void)look(0);
        return (Datum)0;
    }

    // A look that wrote (dead letters, row locks of the table store) ends the wait: its locks
    // are not held while sleeping.
    const TransactionId xid_before = GetTopTransactionIdIfAny();
    const uint64_t dead_before = dead_letter_calls;
    auto wrote = [&] {
        return dead_letter_calls != dead_before ||
               (!TransactionIdIsValid(xid_before) && TransactionIdIsValid(GetTopTransactionIdIfAny()));
    };
    core::WaitFilter filter;
    filter.inbox = std::find(sources.begin(), sources.end(), Source::inbox) != sources.end();
    filter.outbox = std::find(sources.begin(), sources.end(), Source::outbox) != sources.end();
    filter.any_consumer = !consumer;
    if (consumer) filter.consumer_hash = shm::consumer_hash(*consumer);
    if (!PG_ARGISNULL(4)) {
        filter.partition_count = c.partition_count;
        filter.npartitions = static_cast<int>(std::min<std::size_t>(partitions.size(), core::kWaitMaxPartitions + 1));
        for (int i = 0; i < filter.npartitions && i < core::kWaitMaxPartitions; ++i) filter.partitions[i] = partitions[i];
    }
    filter.max_rows = max_rows;
    auto next_due = [&](int64_t elapsed_us) -> int64_t {
        LookMemory memory;
        const TimestampTz now = add_to_timestamp(p_now, elapsed_us, "p_now + the time waited");
        TimestampTz due = PG_INT64_MAX;
        for (Source s : sources) due = std::min(due, next_due_of(s, consumer, now));
        int64_t after_us = 0;
        return due == PG_INT64_MAX || __builtin_sub_overflow(due, p_now, &after_us) ? core::kNever : after_us;
    };
    claim_with_wait(wait_us, filter, look, wrote, routed ? NextDue([](int64_t) { return core::kNever; }) : next_due);
    return (Datum)0;
}
