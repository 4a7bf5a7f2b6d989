// claim_work (DESIGN §3.4) for the inbox and the outbox; shared helpers of the work functions.
//
// Locking rules that keep callers from waiting on each other or deadlocking:
//  - claim_work only ever locks with SKIP LOCKED, so it never waits;
//  - complete / fail / renew / release lock the rows they name sorted by message id, so two
//    of them over overlapping ids wait for each other at most.
// Per-stream order: a row is handed out only when no older unfinished row of its stream exists
// (one index probe), plus up to p_max_per_stream - 1 consecutive followers of a head it took.
#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "core/backoff.h"
#include "pg/args.h"
#include "pg/arrays.h"
#include "pg/dedup.h"
#include "pg/lease_store.h"
#include "pg/settings.h"
#include "pg/spi.h"
#include "pg/work.h"

#include "pg/citus_route.h"
#include "pg/shard_scope.h"
#include "pg/work_wait.h"

namespace whizbang::pg {
namespace {

// This instance's pre-leased rows that still carry the lease they were stored with.
WorkPlan preleased_plan = WorkPlan::replanned(
    "SELECT w.message_id, w.consumer::pg_catalog.text, w.attempts, w.lease_token"
    "  FROM whizbang.wh_inbox_preleased p JOIN whizbang.wh_inbox_work w"
    "    ON w.message_id OPERATOR(pg_catalog.=) p.message_id AND w.consumer OPERATOR(pg_catalog.=) p.consumer"
    " WHERE p.instance_id OPERATOR(pg_catalog.=) $1"
    "   AND w.lease_instance OPERATOR(pg_catalog.=) $1 AND w.lease_token OPERATOR(pg_catalog.=) p.lease_token"
    "   AND w.lease_expiry OPERATOR(pg_catalog.>) $2 AND w.processed_at IS NULL"
    "   AND ($3::pg_catalog.text IS NULL OR w.consumer OPERATOR(pg_catalog.=) $3)"
    "   AND ($4::pg_catalog.int4[] IS NULL OR whizbang.partition_of(COALESCE(w.stream_id, w.message_id), $5)"
    "        OPERATOR(pg_catalog.=) ANY ($4))"
    " ORDER BY w.stream_id, w.stream_seq LIMIT $6"
    " FOR UPDATE OF w SKIP LOCKED",
    {UUIDOID, TIMESTAMPTZOID, TEXTOID, INT4ARRAYOID, INT4OID, INT4OID});

// Drops the entries just handed back. Stale ones (completed, or re-claimed by another instance
// after the lease lapsed) are never handed back (the join above checks the lease) and are
// purged by perform_maintenance, so a claim that got nothing pre-leased writes nothing here.
WorkPlan forget_preleased_plan(
    "DELETE FROM whizbang.wh_inbox_preleased p"
    " WHERE p.instance_id OPERATOR(pg_catalog.=) $1"
    "   AND (p.message_id, p.consumer) OPERATOR(pg_catalog.=) ANY ("
    "        SELECT * FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)))",
    {UUIDOID, UUIDARRAYOID, TEXTARRAYOID});

// Rows without a stream: due, not under a live lease, oldest due first, locked without
// waiting as the LIMIT takes them (rows another claim holds are skipped, none is over-locked).
WorkPlan unstreamed_plan = WorkPlan::replanned(
    "SELECT w.message_id, w.consumer::pg_catalog.text, w.attempts"
    "  FROM whizbang.wh_inbox_work w"
    " WHERE w.processed_at IS NULL AND w.stream_id IS NULL AND w.scheduled_for OPERATOR(pg_catalog.<=) $1"
    "   AND (w.lease_expiry IS NULL OR w.lease_expiry OPERATOR(pg_catalog.<=) $1)"
    "   AND ($2::pg_catalog.text IS NULL OR w.consumer OPERATOR(pg_catalog.=) $2)"
    "   AND ($3::pg_catalog.int4[] IS NULL OR whizbang.partition_of(w.message_id, $4) OPERATOR(pg_catalog.=) ANY ($3))"
    " ORDER BY w.scheduled_for LIMIT $5"
    " FOR UPDATE OF w SKIP LOCKED",
    {TIMESTAMPTZOID, TEXTOID, INT4ARRAYOID, INT4OID, INT4OID});

// Stream heads that could be handed out now, found by skipping from stream to stream through
// wh_inbox_work_stream (a loose index scan) from a starting point that rotates between claims,
// so every stream gets its turn. Read without locks: lock_heads_plan checks again.
WorkPlan stream_heads_plan = WorkPlan::replanned(
    stream_walk_sql() +
    "SELECT h.message_id, h.consumer::pg_catalog.text, h.stream_id"
    "  FROM " + stream_heads_from("w.message_id, w.consumer, w.stream_id, w.scheduled_for, w.lease_expiry") +
    " WHERE h.scheduled_for OPERATOR(pg_catalog.<=) $1"
    "   AND (h.lease_expiry IS NULL OR h.lease_expiry OPERATOR(pg_catalog.<=) $1)"
    "   AND ($3::pg_catalog.int4[] IS NULL OR whizbang.partition_of(h.stream_id, $4) OPERATOR(pg_catalog.=) ANY ($3))"
    " LIMIT $5",
    {TIMESTAMPTZOID, TEXTOID, INT4ARRAYOID, INT4OID, INT4OID, BOOLOID, TEXTOID, UUIDOID});

// Locks up to $4 candidates, oldest due first, without waiting (a candidate someone else just
// took is skipped), checking again that each is still due, free and the oldest unfinished row
// of its stream. Rows are locked as the LIMIT takes them: none is held for nothing.
WorkPlan lock_heads_plan = WorkPlan::replanned(
    "SELECT w.message_id, w.consumer::pg_catalog.text, w.attempts, w.stream_id, w.stream_seq, w.lease_token"
    "  FROM whizbang.wh_inbox_work w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($1) AND w.consumer OPERATOR(pg_catalog.=) ANY ($2)"
    "   AND w.processed_at IS NULL AND w.scheduled_for OPERATOR(pg_catalog.<=) $3"
    "   AND (w.lease_expiry IS NULL OR w.lease_expiry OPERATOR(pg_catalog.<=) $3)"
    "   AND NOT EXISTS ("
    "        SELECT 1 FROM whizbang.wh_inbox_work o"
    "         WHERE o.consumer OPERATOR(pg_catalog.=) w.consumer AND o.stream_id OPERATOR(pg_catalog.=) w.stream_id"
    "           AND o.stream_seq OPERATOR(pg_catalog.<) w.stream_seq AND o.processed_at IS NULL)"
    // One holder per stream needs no look-ahead: the head's lease is the stream's (work_runs.cpp).
    " ORDER BY w.scheduled_for LIMIT $4"
    " FOR UPDATE OF w SKIP LOCKED",
    {UUIDARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, INT4OID});

// The rows after each head of a stream, in order, and whether each could be handed out now.
WorkPlan followers_plan = WorkPlan::replanned(
    "SELECT h.ord, f.message_id, f.attempts,"
    "       (f.scheduled_for OPERATOR(pg_catalog.<=) $4"
    "        AND (f.lease_expiry IS NULL OR f.lease_expiry OPERATOR(pg_catalog.<=) $4)) AS ready"
    "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3))"
    "       WITH ORDINALITY AS h(consumer, stream_id, seq, ord)"
    "  CROSS JOIN LATERAL ("
    "       SELECT f.message_id, f.attempts, f.scheduled_for, f.lease_expiry, f.stream_seq"
    "         FROM whizbang.wh_inbox_work f"
    "        WHERE f.consumer OPERATOR(pg_catalog.=) h.consumer AND f.stream_id OPERATOR(pg_catalog.=) h.stream_id"
    "          AND f.stream_seq OPERATOR(pg_catalog.>) h.seq AND f.processed_at IS NULL"
    "        ORDER BY f.stream_seq LIMIT $5) f"
    " ORDER BY h.ord, f.stream_seq",
    {TEXTARRAYOID, UUIDARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID, INT4OID});

// Locks chosen followers without waiting; a row someone else holds ends its stream's run.
// Found through the primary key (message_id leads it); a row of another consumer that shares
// an id is locked for nothing and not handed out (the caller matches pairs).
WorkPlan lock_followers_plan = WorkPlan::replanned(
    "SELECT w.message_id, w.consumer::pg_catalog.text FROM whizbang.wh_inbox_work w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($1) AND w.consumer OPERATOR(pg_catalog.=) ANY ($2)"
    "   AND w.processed_at IS NULL AND w.scheduled_for OPERATOR(pg_catalog.<=) $3"
    "   AND (w.lease_expiry IS NULL OR w.lease_expiry OPERATOR(pg_catalog.<=) $3)"
    " FOR UPDATE OF w SKIP LOCKED",
    {UUIDARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID});

// Leases the picks (attempts + 1, the claim's token) and returns them with their message,
// in pick order, as claim_work's result rows. Planned per call: a generic plan made while the
// queue was small hash-joins the ids against a scan of the whole work table, dead rows and
// all, for as long as it is cached (found by bench/outbox).
const char* const kLeaseRows =
    "WITH c AS ("
    "  UPDATE whizbang.wh_inbox_work w"
    "     SET attempts = w.attempts OPERATOR(pg_catalog.+) 1, lease_instance = $4, lease_token = u.token,"
    "         lease_expiry = $5"
    "    FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3))"
    "         WITH ORDINALITY AS u(id, consumer, token, ord)"
    "   WHERE w.message_id OPERATOR(pg_catalog.=) u.id AND w.consumer OPERATOR(pg_catalog.=) u.consumer"
    "  RETURNING w.message_id, w.consumer, w.stream_id, w.partition_number, w.attempts, w.lease_token,"
    "            w.lease_expiry, u.ord)";
CachedPlan hand_out_plans[2] = {
    CachedPlan::replanned(std::string(kLeaseRows) +
                   "SELECT 'inbox'::pg_catalog.text, c.message_id, c.stream_id, c.partition_number, i.handler_name,"
                   "       NULL::pg_catalog.text, i.message_type, i.envelope, i.metadata, i.scope, c.attempts,"
                   "       c.lease_token, c.lease_expiry, c.consumer::pg_catalog.text"
                   "  FROM c JOIN whizbang.wh_inbox i"
                   "    ON i.message_id OPERATOR(pg_catalog.=) c.message_id AND i.consumer OPERATOR(pg_catalog.=) c.consumer"
                   " ORDER BY c.ord",
               {UUIDARRAYOID, TEXTARRAYOID, INT8ARRAYOID, UUIDOID, TIMESTAMPTZOID}),
    CachedPlan::replanned(outbox_twin(kLeaseRows) +
                   "SELECT 'outbox'::pg_catalog.text, c.message_id, c.stream_id, c.partition_number,"
                   "       NULL::pg_catalog.text, o.destination, o.message_type, o.event_data, o.metadata, o.scope,"
                   "       c.attempts, c.lease_token, c.lease_expiry, NULL::pg_catalog.text"
                   "  FROM c JOIN whizbang.wh_outbox o ON o.message_id OPERATOR(pg_catalog.=) c.message_id"
                   " ORDER BY c.ord",
               {UUIDARRAYOID, TEXTARRAYOID, INT8ARRAYOID, UUIDOID, TIMESTAMPTZOID})};

// Moves work to wh_dead_letters, message and all, in one statement (atomic with the caller).
const char* const kDeleteWork =
    "WITH u AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3))"
    "           AS u(id, consumer, error)),"
    " w AS (DELETE FROM whizbang.wh_inbox_work w USING u"
    "        WHERE w.message_id OPERATOR(pg_catalog.=) u.id AND w.consumer OPERATOR(pg_catalog.=) u.consumer"
    "       RETURNING w.message_id, w.consumer, w.attempts, COALESCE(u.error, w.last_error) AS error),";
// `sharded`: inside a routed call on a Citus node (shard_scope.h). A shard has no identity
// default, so the id is made there: the node's group id in the top 16 bits and the node's own
// sequence below, unique across the cluster as Citus makes its bigint identities.
std::string dead_letter_sql(Source source, bool sharded) {
    std::string sql = source == Source::inbox ? std::string(kDeleteWork) : outbox_twin(kDeleteWork);
    sql += source == Source::inbox ? " m AS (DELETE FROM whizbang.wh_inbox i USING w"
                                     "        WHERE i.message_id OPERATOR(pg_catalog.=) w.message_id"
                                     "          AND i.consumer OPERATOR(pg_catalog.=) w.consumer"
                                     "       RETURNING i.*)"
                                   : " m AS (DELETE FROM whizbang.wh_outbox o USING w"
                                     "        WHERE o.message_id OPERATOR(pg_catalog.=) w.message_id"
                                     "       RETURNING o.*)";
    sql += "INSERT INTO whizbang.wh_dead_letters (";
    if (sharded) sql += "dead_letter_id, ";
    sql += "source, consumer, message_id, handler_name, destination, message_type,"
           "  envelope, metadata, scope, stream_id, is_event, sent_at, received_at, attempts, last_error, dead_lettered_at";
    // A single server's table may predate the distribution column (0.8.0).
    sql += sharded ? ", partition_number) SELECT " : ") SELECT ";
    if (sharded)
        sql += "((SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)::pg_catalog.int8 OPERATOR(pg_catalog.<<) 48)"
               " OPERATOR(pg_catalog.|) pg_catalog.nextval('whizbang.wh_dead_letters_dead_letter_id_seq'), ";
    sql += source == Source::inbox
               ? "'inbox', m.consumer, m.message_id, m.handler_name, NULL, m.message_type, m.envelope,"
                 "       m.metadata, m.scope, m.stream_id, m.is_event, m.sent_at, m.received_at, w.attempts, w.error, $4"
                 "  FROM m JOIN w ON w.message_id OPERATOR(pg_catalog.=) m.message_id"
                 "   AND w.consumer OPERATOR(pg_catalog.=) m.consumer"
               : "'outbox', NULL, m.message_id, NULL, m.destination, m.message_type, m.event_data,"
                 "       m.metadata, m.scope, m.stream_id, m.is_event, NULL, m.created_at, w.attempts, w.error, $4"
                 "  FROM m JOIN w ON w.message_id OPERATOR(pg_catalog.=) m.message_id";
    if (sharded) {
        // The dead letter's partition: its message's.
        const std::size_t from = sql.rfind("  FROM m JOIN w");
        sql.insert(from, ", m.partition_number");
    }
    return sql;
}
CachedPlan dead_letter_plans[2][2] = {
    {CachedPlan(dead_letter_sql(Source::inbox, false), {UUIDARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID}),
     CachedPlan(dead_letter_sql(Source::inbox, true), {UUIDARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID})},
    {CachedPlan(dead_letter_sql(Source::outbox, false), {UUIDARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID}),
     CachedPlan(dead_letter_sql(Source::outbox, true), {UUIDARRAYOID, TEXTARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID})}};

struct Pick {
    core::Uuid id{};
    std::string consumer;
    int attempts = 0;
    int64_t token = 0;  // pre-leased rows keep theirs; 0: the claim's fresh token
};

struct Head {
    std::string consumer;
    core::Uuid stream{};
    int64_t seq = 0;
};

Pick pick_from_row(uint64 r) {
    bool isnull = false;
    Pick p;
    p.id = uuid_from_datum(spi_value(r, 1, &isnull));
    p.consumer = text_from_datum(spi_value(r, 2, &isnull));
    p.attempts = DatumGetInt32(spi_value(r, 3, &isnull));
    return p;
}

// 1. Rows stored pre-leased to this instance come back first, with their token.
std::vector<Pick> take_preleased(const Claim& c) {
    const char nulls[] = {' ', ' ', c.consumer_null, c.partitions_null, ' ', ' ', '\0'};
    uint64 rows = preleased_plan[c.source].execute({PointerGetDatum(c.instance.data()), TimestampTzGetDatum(c.now), c.consumer,
                                          c.partitions, Int32GetDatum(c.partition_count), Int32GetDatum(c.max_rows)},
                                         nulls);
    std::vector<Pick> picks;
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        Pick p = pick_from_row(r);
        p.token = DatumGetInt64(spi_value(r, 4, &isnull));
        picks.push_back(std::move(p));
    }
    std::vector<core::Uuid> ids;
    std::vector<std::string> consumers;
    for (const Pick& p : picks) {
        ids.push_back(p.id);
        consumers.push_back(p.consumer);
    }
    if (!picks.empty())
        forget_preleased_plan[c.source].execute({PointerGetDatum(c.instance.data()), uuid_array(ids), text_array(consumers)});
    return picks;
}

// Candidate stream heads (message id, consumer), up to `room`.
std::vector<std::pair<core::Uuid, std::string>> find_stream_heads(const Claim& c, int room) {
    std::vector<std::pair<core::Uuid, std::string>> found;
    std::set<std::pair<core::Uuid, std::string>> seen;
    walk_stream_heads(c, stream_heads_plan[c.source], room, [&](uint64 r, StreamCursor& at) {
        bool isnull = false;
        std::pair<core::Uuid, std::string> key{uuid_from_datum(spi_value(r, 1, &isnull)),
                                               text_from_datum(spi_value(r, 2, &isnull))};
        at.consumer = key.second;
        at.stream = uuid_from_datum(spi_value(r, 3, &isnull));
        if (!seen.insert(key).second) return false;
        found.push_back(std::move(key));
        return true;
    });
    return found;
}

// Locks up to `room` stream heads. Candidates are read without locks and then locked without
// waiting, so a concurrent claim may take some first: then the scan goes on past them (the
// cursor moves), a few times at most, instead of answering short while heads are free.
std::vector<Pick> take_stream_heads(const Claim& c, int room, std::vector<Head>& heads) {
    std::vector<Pick> picks;
    std::set<std::pair<core::Uuid, std::string>> taken;
    for (int attempt = 0; attempt < 4 && static_cast<int>(picks.size()) < room; ++attempt) {
        const int want = room - static_cast<int>(picks.size());
        const int wanted = want > INT32_MAX / 2 ? INT32_MAX : want * 2;
        std::vector<std::pair<core::Uuid, std::string>> found = find_stream_heads(c, wanted);
        std::vector<core::Uuid> ids;
        std::vector<std::string> consumers;
        for (const auto& [id, consumer] : found)
            if (!taken.count({id, consumer})) {
                ids.push_back(id);
                consumers.push_back(consumer);
            }
        if (ids.empty()) break;
        uint64 rows = lock_heads_plan[c.source].execute(
            {uuid_array(ids), text_array(consumers), TimestampTzGetDatum(c.now), Int32GetDatum(want)});
        std::vector<Pick> locked;
        std::vector<Head> locked_heads;
        std::vector<RunAfter> lapsed;  // heads taken over from a holder whose lease lapsed
        std::vector<std::size_t> lapsed_at;
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false, no_token = false;
            Pick p = pick_from_row(r);
            taken.emplace(p.id, p.consumer);
            Head h{p.consumer, uuid_from_datum(spi_value(r, 4, &isnull)), DatumGetInt64(spi_value(r, 5, &isnull))};
            Datum old_token = spi_value(r, 6, &no_token);
            if (!no_token) {
                lapsed.push_back({h.consumer, h.stream, h.seq, DatumGetInt64(old_token)});
                lapsed_at.push_back(locked.size());
            }
            locked_heads.push_back(std::move(h));
            locked.push_back(std::move(p));
        }
        // The old holder's run ends here, or the head is not handed out this time: a row of that
        // run is being completed right now, and it must not end up done ahead of the head.
        std::vector<char> keep(locked.size(), 1);
        for (std::size_t k : end_runs(c.source, lapsed, false)) keep[lapsed_at[k]] = 0;
        for (std::size_t i = 0; i < locked.size(); ++i) {
            if (!keep[i]) continue;
            if (c.max_per_stream > 1) heads.push_back(std::move(locked_heads[i]));
            picks.push_back(std::move(locked[i]));
        }
        if (static_cast<int>(found.size()) < wanted) break;  // every stream was looked at
    }
    return picks;
}

// Locks up to `room` rows without a stream.
std::vector<Pick> take_unstreamed(const Claim& c, int room) {
    const char nulls[] = {' ', c.consumer_null, c.partitions_null, ' ', ' ', '\0'};
    uint64 rows = unstreamed_plan[c.source].execute({TimestampTzGetDatum(c.now), c.consumer, c.partitions,
                                           Int32GetDatum(c.partition_count), Int32GetDatum(room)},
                                          nulls);
    std::vector<Pick> picks;
    for (uint64 r = 0; r < rows; ++r) picks.push_back(pick_from_row(r));
    return picks;
}

// 2. Heads: stream heads and rows without a stream, due and free. Which kind fills the claim
// first alternates between claims of a backend, so neither kind can starve the other (DESIGN
// orders rows within a stream, not across streams). `heads` gets the stream heads, whose
// followers may come along.
std::vector<Pick> take_heads(const Claim& c, int room, std::vector<Head>& heads) {
    static unsigned claims[2] = {0, 0};
    const bool streams_first = (claims[static_cast<int>(c.source)]++ & 1u) == 0;
    std::vector<Pick> picks = streams_first ? take_stream_heads(c, room, heads) : take_unstreamed(c, room);
    const int rest = room - static_cast<int>(picks.size());
    if (rest > 0) {
        std::vector<Pick> more = streams_first ? take_unstreamed(c, rest) : take_stream_heads(c, rest, heads);
        picks.insert(picks.end(), more.begin(), more.end());
    }
    return picks;
}

// 3. The consecutive ready rows after each head, at most p_max_per_stream - 1 per stream and
// `room` in all. A row that is not ready, or that someone else holds, ends its stream's run.
std::vector<Pick> take_followers(const Claim& c, const std::vector<Head>& heads, int room) {
    std::vector<Pick> picks;
    if (heads.empty() || room <= 0) return picks;
    std::vector<std::string> consumers;
    std::vector<core::Uuid> streams;
    std::vector<int64_t> seqs;
    for (const Head& h : heads) {
        consumers.push_back(h.consumer);
        streams.push_back(h.stream);
        seqs.push_back(h.seq);
    }
    uint64 rows = followers_plan[c.source].execute({text_array(consumers), uuid_array(streams), int8_array(seqs),
                                          TimestampTzGetDatum(c.now), Int32GetDatum(std::min(c.max_per_stream - 1, room))});
    std::vector<std::vector<Pick>> runs(heads.size());
    std::vector<char> stopped(heads.size(), 0);
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        std::size_t h = static_cast<std::size_t>(DatumGetInt64(spi_value(r, 1, &isnull))) - 1;
        if (stopped[h]) continue;
        if (!DatumGetBool(spi_value(r, 4, &isnull))) {
            stopped[h] = 1;
            continue;
        }
        Pick p;
        p.id = uuid_from_datum(spi_value(r, 2, &isnull));
        p.consumer = heads[h].consumer;
        p.attempts = DatumGetInt32(spi_value(r, 3, &isnull));
        runs[h].push_back(std::move(p));
    }
    std::vector<core::Uuid> want_ids;
    std::vector<std::string> want_consumers;
    for (const auto& run : runs)
        for (const Pick& p : run) {
            want_ids.push_back(p.id);
            want_consumers.push_back(p.consumer);
        }
    if (want_ids.empty()) return picks;
    uint64 locked_rows =
        lock_followers_plan[c.source].execute({uuid_array(want_ids), text_array(want_consumers), TimestampTzGetDatum(c.now)});
    std::set<std::pair<core::Uuid, std::string>> locked;
    for (uint64 r = 0; r < locked_rows; ++r) {
        bool isnull = false;
        locked.emplace(uuid_from_datum(spi_value(r, 1, &isnull)), text_from_datum(spi_value(r, 2, &isnull)));
    }
    for (const auto& run : runs)
        for (const Pick& p : run) {
            if (room == 0 || !locked.count({p.id, p.consumer})) break;
            picks.push_back(p);
            --room;
        }
    return picks;
}

// 4. Hands the picks out (one fresh token per claim, drawn once) and appends them to the
// result; a row whose next delivery would exceed max_attempts goes to the dead letters
// instead. Returns how many were handed out; `dead` tells whether any was dead-lettered.
int hand_out(const Claim& c, const std::vector<Pick>& picks, int64_t max_attempts, int64_t& fresh_token,
             ReturnSetInfo* rsinfo, bool& dead) {
    std::vector<core::Uuid> dead_ids, ids;
    std::vector<std::string> dead_consumers, consumers;
    std::vector<int64_t> tokens;
    for (const Pick& p : picks) {
        if (p.attempts + 1 > max_attempts) {
            dead_ids.push_back(p.id);
            dead_consumers.push_back(p.consumer);
            continue;
        }
        if (p.token == 0 && fresh_token == 0) fresh_token = next_lease_token();
        ids.push_back(p.id);
        consumers.push_back(p.consumer);
        tokens.push_back(p.token != 0 ? p.token : fresh_token);
    }
    dead_letter(c.source, dead_ids, dead_consumers, std::vector<std::optional<std::string>>(dead_ids.size()), c.now);
    dead = !dead_ids.empty();
    if (ids.empty()) return 0;
    uint64 rows = hand_out_plans[static_cast<int>(c.source)].execute({uuid_array(ids), text_array(consumers), int8_array(tokens),
                                         PointerGetDatum(c.instance.data()), TimestampTzGetDatum(c.expiry)});
    spi_rows_to_result(rsinfo, rows);
    return static_cast<int>(rows);
}


// Claims up to c.max_rows rows of one source and appends them to the result: pre-leased
// rows first, then heads and their followers. Returns how many were handed out.
int claim_from(const Claim& c, int64_t max_attempts, int64_t& fresh_token, ReturnSetInfo* rsinfo) {
    std::vector<Pick> picks = take_preleased(c);
    // Rows dead-lettered in a round leave room: look again so a worker is not sent to sleep
    // while due work waits (bounded: every round removes what it dead-letters).
    int handed = 0;
    for (int round = 0; round < 8; ++round) {
        std::vector<Head> heads;
        int room = c.max_rows - handed - static_cast<int>(picks.size());
        if (room > 0) {
            std::vector<Pick> more = take_heads(c, room, heads);
            picks.insert(picks.end(), more.begin(), more.end());
        }
        room = c.max_rows - handed - static_cast<int>(picks.size());
        std::vector<Pick> followers = take_followers(c, heads, room);
        picks.insert(picks.end(), followers.begin(), followers.end());
        bool dead = false;
        handed += hand_out(c, picks, max_attempts, fresh_token, rsinfo, dead);
        if (!dead || handed >= c.max_rows) break;
        picks.clear();
    }
    return handed;
}

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
        return OidIsValid(schema) ? whizbang_relid_unguarded(source == Source::inbox ? "wh_inbox_work" : "wh_outbox_work")
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
           "  (SELECT w.consumer, w.stream_id FROM whizbang.wh_inbox_work w"
           "    WHERE w.stream_id IS NOT NULL AND w.processed_at IS NULL"
           "      AND ($2::pg_catalog.text IS NULL OR w.consumer OPERATOR(pg_catalog.=) $2)"
           "      AND ($6 OR (w.consumer, w.stream_id) OPERATOR(pg_catalog.>) ($7::pg_catalog.text COLLATE pg_catalog.\"C\", $8))"
           "    ORDER BY w.consumer, w.stream_id, w.stream_seq LIMIT 1)"
           "  UNION ALL"
           "  SELECT n.consumer, n.stream_id FROM streams s CROSS JOIN LATERAL ("
           "    SELECT w.consumer, w.stream_id FROM whizbang.wh_inbox_work w"
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
    "  (SELECT pg_catalog.min(w.scheduled_for) FROM whizbang.wh_inbox_work w"
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
           "      FROM whizbang.wh_inbox_work w"
           "     WHERE w.consumer OPERATOR(pg_catalog.=) s.consumer AND w.stream_id OPERATOR(pg_catalog.=) s.stream_id"
           "       AND w.processed_at IS NULL"
           "     ORDER BY w.stream_seq LIMIT 1) h";
}

std::string outbox_twin(const std::string& sql) {
    static const std::string from = "whizbang.wh_inbox_", to = "whizbang.wh_outbox_";
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
    dead_letter_plans[static_cast<int>(source)][in_shard_scope() ? 1 : 0].execute(
        {uuid_array(ids), text_array(consumers), nullable_text_array(errors), TimestampTzGetDatum(now)});
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
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    const int64_t token = coordinator_lease_token();  // one token for the whole claim, as on one server
    // Each claim starts at another node (and, on a node, another shard) so that none waits
    // behind the others; by the token, so that the same calls meet the same order.
    const std::size_t first = parts.empty() ? 0 : static_cast<std::size_t>(token % static_cast<int64_t>(parts.size()));
    int handed = 0;
    for (std::size_t k = 0; k < parts.size() && handed < max_rows; ++k) {
        const auto& [anchor, mine] = parts[(first + k) % parts.size()];
        std::vector<Datum> values;
        std::vector<char> nulls;
        caller_arguments(fcinfo, values, nulls);
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
        uint64 rows = routed_call(anchor, "claim_work", types, values, nulls, token);
        spi_rows_to_result(rsinfo, rows);
        handed += static_cast<int>(rows);
    }
    spi.finish();
    return handed;
}

}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// claim_work(p_instance_id, p_source, p_max_rows, p_lease_seconds, p_partitions, p_partition_count,
//            p_max_per_stream, p_now, p_consumer, p_wait) RETURNS TABLE(source, message_id, ...)
// (a database still at 0.6.0 calls it without p_wait)
WB_FUNCTION(wb_claim_work) {
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
        const int64_t max_attempts = setting_int("max_attempts");
        int64_t fresh_token = 0;
        SharedHandOut shared;
        shared.result_desc = rsinfo->setDesc;
        for (Source s : order) {
            c.source = s;
            // p_consumer selects inbox rows; outbox rows have no consumer.
            const bool by_consumer = s == Source::inbox && consumer;
            c.consumer = by_consumer ? text_datum(*consumer) : (Datum)0;
            c.consumer_null = by_consumer ? ' ' : 'n';
            c.max_rows -= shared_leases_active() ? claim_shared(c, max_attempts, shared)
                                                 : claim_from(c, max_attempts, fresh_token, rsinfo);
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
