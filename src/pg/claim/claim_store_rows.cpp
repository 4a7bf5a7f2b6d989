// claim_work's lease store in the work rows (DESIGN §3.8 without the preload, claim_engine.h).
//
// Locking rules that keep callers from waiting on each other: a claim only ever locks with SKIP
// LOCKED, so it never waits; a candidate someone else just took is passed over. A lease is
// written into its row by the UPDATE that hands the round's picks out, with one fresh token per
// claim_work call, drawn once.
#include <algorithm>
#include <set>

#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/claim/claim_engine.h"
#include "pg/claim/retry_policies.h"
#include "pg/ops/counters.h"
#include "pg/boundary/spi.h"
#include "pg/claim/work.h"

namespace whizbang::pg {
namespace {

// claim_work's result rows in SPI's tuple table, counted by their consumer (column 14; NULL for
// the outbox).
void count_claimed(Source source, uint64 rows) {
    count_rows(source, core::Counter::claimed, rows, [](std::size_t r) {
        bool isnull = false;
        const Datum consumer = spi_value(r, 14, &isnull);
        return isnull ? std::string() : text_from_datum(consumer);
    });
}

// This instance's pre-leased rows that still carry the lease they were stored with.
WorkPlan preleased_plan = WorkPlan::replanned(
    "SELECT w.message_id, w.consumer::pg_catalog.text, w.attempts, w.lease_token"
    "  FROM whizbang.wh_inbox_preleased p JOIN whizbang.wh_inbox w"
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


// Rows without a stream: due, not under a live lease, oldest due first, locked without
// waiting as the LIMIT takes them (rows another claim holds are skipped, none is over-locked).
WorkPlan unstreamed_plan = WorkPlan::replanned(
    "SELECT w.message_id, w.consumer::pg_catalog.text, w.attempts"
    "  FROM whizbang.wh_inbox w"
    " WHERE w.processed_at IS NULL AND w.stream_id IS NULL AND w.scheduled_for OPERATOR(pg_catalog.<=) $1"
    "   AND (w.lease_expiry IS NULL OR w.lease_expiry OPERATOR(pg_catalog.<=) $1)"
    "   AND ($2::pg_catalog.text IS NULL OR w.consumer OPERATOR(pg_catalog.=) $2)"
    "   AND ($3::pg_catalog.int4[] IS NULL OR whizbang.partition_of(w.message_id, $4) OPERATOR(pg_catalog.=) ANY ($3))"
    " ORDER BY w.scheduled_for LIMIT $5"
    " FOR UPDATE OF w SKIP LOCKED",
    {TIMESTAMPTZOID, TEXTOID, INT4ARRAYOID, INT4OID, INT4OID});

// Locks up to $4 candidates, oldest due first, without waiting (a candidate someone else just
// took is skipped), checking again that each is still due, free and the oldest unfinished row
// of its stream. Rows are locked as the LIMIT takes them: none is held for nothing.
WorkPlan lock_heads_plan = WorkPlan::replanned(
    "SELECT w.message_id, w.consumer::pg_catalog.text, w.attempts, w.stream_id, w.stream_seq, w.lease_token"
    "  FROM whizbang.wh_inbox w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($1) AND w.consumer OPERATOR(pg_catalog.=) ANY ($2)"
    "   AND w.processed_at IS NULL AND w.scheduled_for OPERATOR(pg_catalog.<=) $3"
    "   AND (w.lease_expiry IS NULL OR w.lease_expiry OPERATOR(pg_catalog.<=) $3)"
    "   AND NOT EXISTS ("
    "        SELECT 1 FROM whizbang.wh_inbox o"
    "         WHERE o.consumer OPERATOR(pg_catalog.=) w.consumer AND o.stream_id OPERATOR(pg_catalog.=) w.stream_id"
    "           AND o.stream_seq OPERATOR(pg_catalog.<) w.stream_seq AND o.processed_at IS NULL)"
    // One holder per stream needs no look-ahead: the head's lease is the stream's (work_runs.cpp).
    " ORDER BY w.scheduled_for LIMIT $4"
    " FOR UPDATE OF w SKIP LOCKED",
    {UUIDARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID, INT4OID});

// Locks chosen followers without waiting; a row someone else holds ends its stream's run.
// Found through the primary key (message_id leads it); a row of another consumer that shares
// an id is locked for nothing and not handed out (the caller matches pairs).
WorkPlan lock_followers_plan = WorkPlan::replanned(
    "SELECT w.message_id, w.consumer::pg_catalog.text FROM whizbang.wh_inbox w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($1) AND w.consumer OPERATOR(pg_catalog.=) ANY ($2)"
    "   AND w.processed_at IS NULL AND w.scheduled_for OPERATOR(pg_catalog.<=) $3"
    "   AND (w.lease_expiry IS NULL OR w.lease_expiry OPERATOR(pg_catalog.<=) $3)"
    " FOR UPDATE OF w SKIP LOCKED",
    {UUIDARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID});

// Leases the picks (attempts + 1, the claim's token) and returns them with their message,
// in pick order, as claim_work's result rows. Planned per call: a generic plan made while the
// queue was small hash-joins the ids against a scan of the whole work table, dead rows and
// all, for as long as it is cached (found by bench/outbox).
// Leases the picks (attempts + 1, the claim's token) and returns them, message and all, in pick
// order, as claim_work's result rows. Planned per call: a generic plan made while the queue was
// small hash-joins the ids against a scan of the whole table, dead rows and all, for as long as
// it is cached (found by bench/outbox). In the split layout (before 0.14.0) the message columns
// come from the message row joined to the leased work row.
std::string lease_rows_sql(Source source, bool split) {
    const bool inbox = source == Source::inbox;
    const std::string m = split ? "m." : "w.";
    const std::string message = inbox
        ? m + "handler_name, NULL::pg_catalog.text AS destination, " + m + "message_type, " + m + "envelope, "
        : "NULL::pg_catalog.text AS handler_name, " + m + "destination, " + m + "message_type, " + m + "event_data AS envelope, ";
    std::string sql =
        "WITH c AS ("
        "  UPDATE whizbang.wh_inbox w"
        "     SET attempts = w.attempts OPERATOR(pg_catalog.+) 1, lease_instance = $4, lease_token = u.token,"
        "         lease_expiry = $5"
        "    FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3))"
        "         WITH ORDINALITY AS u(id, consumer, token, ord)";
    if (split)
        sql += inbox ? ", whizbang.wh_inbox/*message*/ m" : ", whizbang.wh_outbox/*message*/ m";
    sql += "   WHERE w.message_id OPERATOR(pg_catalog.=) u.id AND w.consumer OPERATOR(pg_catalog.=) u.consumer";
    if (split)
        sql += inbox ? "     AND m.message_id OPERATOR(pg_catalog.=) w.message_id AND m.consumer OPERATOR(pg_catalog.=) w.consumer"
                     : "     AND m.message_id OPERATOR(pg_catalog.=) w.message_id";
    sql += "  RETURNING '" + std::string(source_name(source)) + "'::pg_catalog.text AS source, w.message_id, w.stream_id,"
           "            w.partition_number, " + message + m + "metadata, " + m + "scope, w.attempts, w.lease_token,"
           "            w.lease_expiry, " + (inbox ? "w.consumer::pg_catalog.text" : "NULL::pg_catalog.text") +
           " AS consumer, u.ord)"
           "SELECT c.source, c.message_id, c.stream_id, c.partition_number, c.handler_name, c.destination,"
           "       c.message_type, c.envelope, c.metadata, c.scope, c.attempts, c.lease_token, c.lease_expiry, c.consumer"
           "  FROM c ORDER BY c.ord";
    if (!inbox) sql = outbox_twin(sql);
    return split ? split_twin(sql) : sql;
}
CachedPlan hand_out_plan(Source source) {
    CachedPlan plan = CachedPlan::replanned(lease_rows_sql(source, false),
                                            {UUIDARRAYOID, TEXTARRAYOID, INT8ARRAYOID, UUIDOID, TIMESTAMPTZOID});
    plan.split_as(lease_rows_sql(source, true));
    return plan;
}
CachedPlan hand_out_plans[2] = {hand_out_plan(Source::inbox), hand_out_plan(Source::outbox)};


class RowStore : public ClaimStore {
public:
    RowStore(const Claim& c, const RetryPolicies& policies, int64_t& fresh_token, ReturnSetInfo* rsinfo)
        : c_(c), policies_(policies), fresh_token_(fresh_token), rsinfo_(rsinfo) {}

    std::vector<Pick> preleased(int room) override {
        const char nulls[] = {' ', ' ', c_.consumer_null, c_.partitions_null, ' ', ' ', '\0'};
        uint64 rows = preleased_plan[c_.source].execute({PointerGetDatum(c_.instance.data()), TimestampTzGetDatum(c_.now),
                                                         c_.consumer, c_.partitions, Int32GetDatum(c_.partition_count),
                                                         Int32GetDatum(room)},
                                                        nulls);
        std::vector<Pick> picks;
        std::vector<core::Uuid> ids;
        std::vector<std::string> consumers;
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false;
            Pick p = pick_from_row(r);
            p.token = DatumGetInt64(spi_value(r, 4, &isnull));
            ids.push_back(p.key.id);
            consumers.push_back(p.key.consumer);
            picks.push_back(std::move(p));
        }
        forget_preleased(c_.source, c_.instance, ids, consumers);
        return picks;
    }

    std::vector<Pick> take_unstreamed(int room) override {
        const char nulls[] = {' ', c_.consumer_null, c_.partitions_null, ' ', ' ', '\0'};
        uint64 rows = unstreamed_plan[c_.source].execute({TimestampTzGetDatum(c_.now), c_.consumer, c_.partitions,
                                                          Int32GetDatum(c_.partition_count), Int32GetDatum(room)},
                                                         nulls);
        std::vector<Pick> picks;
        for (uint64 r = 0; r < rows; ++r) picks.push_back(pick_from_row(r));
        return picks;
    }

    bool free(const StreamRow& row) override { return !row.lease || *row.lease <= c_.now; }

    // Locked without waiting, checked again to be due, free and the oldest unfinished row of
    // their stream. A head whose lease lapsed is taken over: the old holder's run in the stream
    // ends here, or the head is not taken this time (a row of that run is being completed right
    // now, and it must not end up done ahead of the head).
    std::vector<Pick> take_heads(const std::vector<Pick>& heads, int room) override {
        std::vector<core::Uuid> ids;
        std::vector<std::string> consumers;
        for (const Pick& h : heads) {
            ids.push_back(h.key.id);
            consumers.push_back(h.key.consumer);
        }
        uint64 rows = lock_heads_plan[c_.source].execute(
            {uuid_array(ids), text_array(consumers), TimestampTzGetDatum(c_.now), Int32GetDatum(room)});
        std::vector<Pick> locked;
        std::vector<RunAfter> lapsed;
        std::vector<std::size_t> lapsed_at;
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false, no_token = false;
            Pick p = pick_from_row(r);
            p.stream = uuid_from_datum(spi_value(r, 4, &isnull));
            p.seq = DatumGetInt64(spi_value(r, 5, &isnull));
            p.head = true;
            Datum old_token = spi_value(r, 6, &no_token);
            if (!no_token) {
                lapsed.push_back({p.key.consumer, *p.stream, p.seq, DatumGetInt64(old_token)});
                lapsed_at.push_back(locked.size());
            }
            locked.push_back(std::move(p));
        }
        std::vector<char> keep(locked.size(), 1);
        for (std::size_t k : end_runs(c_.source, lapsed, false)) keep[lapsed_at[k]] = 0;
        std::vector<Pick> picks;
        for (std::size_t i = 0; i < locked.size(); ++i)
            if (keep[i]) picks.push_back(std::move(locked[i]));
        return picks;
    }

    std::vector<Pick> take_runs(const std::vector<std::vector<Pick>>& runs, int room) override {
        std::vector<core::Uuid> ids;
        std::vector<std::string> consumers;
        for (const std::vector<Pick>& run : runs)
            for (const Pick& p : run) {
                ids.push_back(p.key.id);
                consumers.push_back(p.key.consumer);
            }
        std::vector<Pick> picks;
        if (ids.empty()) return picks;
        uint64 rows = lock_followers_plan[c_.source].execute({uuid_array(ids), text_array(consumers), TimestampTzGetDatum(c_.now)});
        std::set<std::pair<core::Uuid, std::string>> locked;
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false;
            locked.emplace(uuid_from_datum(spi_value(r, 1, &isnull)), text_from_datum(spi_value(r, 2, &isnull)));
        }
        for (const std::vector<Pick>& run : runs)
            for (const Pick& p : run) {
                if (static_cast<int>(picks.size()) >= room || !locked.count({p.key.id, p.key.consumer})) break;
                picks.push_back(p);
            }
        return picks;
    }

    // The round's picks are handed out together at its end (one statement): the heads' stream
    // positions are known from their locks already.
    HandOut hand_out(const std::vector<Pick>& picks, bool) override {
        HandOut kept;
        for (const Pick& p : picks) {
            if (p.head && p.stream) kept.heads.push_back(p);
            round_.push_back(p);
        }
        kept.pending = static_cast<int>(picks.size());
        return kept;
    }

    // Hands the round's picks out (one fresh token per claim_work call, drawn once) and appends
    // them to the result; a row whose next delivery would exceed its consumer's max_attempts goes to the dead
    // letters instead.
    HandOut end_round() override {
        HandOut done;
        done.pending = -static_cast<int>(round_.size());
        std::vector<core::Uuid> dead_ids, ids;
        std::vector<std::string> dead_consumers, consumers;
        std::vector<int64_t> tokens;
        for (const Pick& p : round_) {
            if (p.attempts + 1 > policies_.of(p.key.consumer).max_attempts) {
                dead_ids.push_back(p.key.id);
                dead_consumers.push_back(p.key.consumer);
                continue;
            }
            if (p.token == 0 && fresh_token_ == 0) fresh_token_ = next_lease_token();
            ids.push_back(p.key.id);
            consumers.push_back(p.key.consumer);
            tokens.push_back(p.token != 0 ? p.token : fresh_token_);
        }
        round_.clear();
        dead_letter(c_.source, dead_ids, dead_consumers, std::vector<std::optional<std::string>>(dead_ids.size()), c_.now);
        done.dead = static_cast<int>(dead_ids.size());
        if (ids.empty()) return done;
        uint64 rows = hand_out_plans[static_cast<int>(c_.source)].execute(
            {uuid_array(ids), text_array(consumers), int8_array(tokens), PointerGetDatum(c_.instance.data()),
             TimestampTzGetDatum(c_.expiry)});
        spi_rows_to_result(rsinfo_, rows);
        count_claimed(c_.source, rows);
        done.handed = static_cast<int>(rows);
        return done;
    }

private:
    Pick pick_from_row(uint64 r) const {
        bool isnull = false;
        Pick p;
        p.key = {c_.source, uuid_from_datum(spi_value(r, 1, &isnull)), text_from_datum(spi_value(r, 2, &isnull))};
        p.attempts = DatumGetInt32(spi_value(r, 3, &isnull));
        return p;
    }

    const Claim& c_;
    const RetryPolicies& policies_;
    int64_t& fresh_token_;
    ReturnSetInfo* rsinfo_;
    std::vector<Pick> round_;  // handed out at the end of the round
};

}  // namespace

int claim_rows(const Claim& c, const RetryPolicies& policies, int64_t& fresh_token, ReturnSetInfo* rsinfo) {
    RowStore store(c, policies, fresh_token, rsinfo);
    return run_claim(c, store);
}

}  // namespace whizbang::pg
