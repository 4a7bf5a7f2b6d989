// A holder's run in a stream, and how it ends (DESIGN §3.4 "per-stream order").
//
// A claim hands out a stream's head with up to p_max_per_stream - 1 consecutive followers, all
// under one token. whizbang keeps this invariant: the leased rows of a stream are one run that
// starts at the stream's head (its oldest unfinished row) and carries one token. So the head's
// lease is the stream's lease: "is the stream held?" is one probe of the head, with no look-ahead
// (0.4.0 looked 1,000 rows ahead and was fooled by longer runs), and a claim may take a head
// whose lease is free or lapsed. Two things keep the invariant:
//  - a claim that takes a head over from a lapsed holder voids the rest of that holder's run, so
//    the old tokens answer lease_lost for every row of the stream and those rows come back after
//    the head (the old holder can no longer complete a row ahead of the head);
//  - fail_work (retry) and release_work of a row end the caller's run after it too: the rows
//    behind it must wait for it (a row waits while an older one is scheduled or pending).
#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/lease/lease_store.h"
#include "pg/claim/work.h"

namespace whizbang::pg {
namespace {

// Locks every row of each run without waiting and voids the runs it could lock whole; returns
// the (1-based) runs it could not (a row of the run is being completed, failed or claimed right
// now). One statement, so the unlocked count and the locked rows come from one snapshot: a
// row whose completion commits meanwhile is counted and not locked, and its run stays whole.
// $5: refund the delivery (a run given back unprocessed) or keep it (a lapsed lease counts).
WorkPlan void_runs_plan = WorkPlan::replanned(
    "WITH h AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3),"
    "                                    pg_catalog.unnest($4)) WITH ORDINALITY AS h(consumer, stream_id, seq, token, ord)),"
    " run AS (SELECT h.ord FROM h JOIN whizbang.wh_inbox f"
    "           ON f.consumer OPERATOR(pg_catalog.=) h.consumer AND f.stream_id OPERATOR(pg_catalog.=) h.stream_id"
    "          AND f.stream_seq OPERATOR(pg_catalog.>) h.seq AND f.processed_at IS NULL"
    "          AND f.lease_token OPERATOR(pg_catalog.=) h.token),"
    " locked AS (SELECT h.ord, f.message_id, f.consumer FROM h JOIN whizbang.wh_inbox f"
    "           ON f.consumer OPERATOR(pg_catalog.=) h.consumer AND f.stream_id OPERATOR(pg_catalog.=) h.stream_id"
    "          AND f.stream_seq OPERATOR(pg_catalog.>) h.seq AND f.processed_at IS NULL"
    "          AND f.lease_token OPERATOR(pg_catalog.=) h.token"
    "          FOR UPDATE OF f SKIP LOCKED),"
    " short AS (SELECT r.ord FROM run r GROUP BY r.ord"
    "           HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>)"
    "                  (SELECT pg_catalog.count(*) FROM locked l WHERE l.ord OPERATOR(pg_catalog.=) r.ord)),"
    " voided AS (UPDATE whizbang.wh_inbox w"
    "               SET lease_instance = NULL, lease_token = NULL, lease_expiry = NULL,"
    "                   attempts = CASE WHEN $5 THEN pg_catalog.int4larger(w.attempts OPERATOR(pg_catalog.-) 1, 0)"
    "                                   ELSE w.attempts END"
    "              FROM locked l"
    "             WHERE w.message_id OPERATOR(pg_catalog.=) l.message_id AND w.consumer OPERATOR(pg_catalog.=) l.consumer"
    "               AND NOT EXISTS (SELECT 1 FROM short s WHERE s.ord OPERATOR(pg_catalog.=) l.ord))"
    "SELECT s.ord FROM short s",
    {TEXTARRAYOID, UUIDARRAYOID, INT8ARRAYOID, INT8ARRAYOID, BOOLOID});

WorkPlan stream_rest_plan(
    "SELECT w.message_id FROM whizbang.wh_inbox w"
    " WHERE w.consumer OPERATOR(pg_catalog.=) $1 AND w.stream_id OPERATOR(pg_catalog.=) $2"
    "   AND w.stream_seq OPERATOR(pg_catalog.>) $3 AND w.processed_at IS NULL",
    {TEXTOID, UUIDOID, INT8OID});

WorkPlan write_attempts_plan(
    "UPDATE whizbang.wh_inbox w SET attempts = pg_catalog.int4larger(w.attempts, u.attempts)"
    "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3)) AS u(id, consumer, attempts)"
    " WHERE w.message_id OPERATOR(pg_catalog.=) u.id AND w.consumer OPERATOR(pg_catalog.=) u.consumer",
    {UUIDARRAYOID, TEXTARRAYOID, INT4ARRAYOID});

}  // namespace

std::vector<core::Uuid> stream_rest(Source source, const std::string& consumer, const core::Uuid& stream, int64_t seq) {
    uint64 rows = stream_rest_plan[source].execute({text_datum(consumer), PointerGetDatum(stream.data()), Int64GetDatum(seq)});
    std::vector<core::Uuid> ids;
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        ids.push_back(uuid_from_datum(spi_value(r, 1, &isnull)));
    }
    return ids;
}

void write_attempts(Source source, const std::vector<core::Uuid>& ids, const std::vector<std::string>& consumers,
                    const std::vector<int>& attempts) {
    if (ids.empty()) return;
    write_attempts_plan[source].execute({uuid_array(ids), text_array(consumers), int4_array(attempts)});
}

std::vector<std::size_t> end_runs(Source source, const std::vector<RunAfter>& runs, bool refund) {
    std::vector<std::size_t> kept;
    if (runs.empty()) return kept;
    if (shared_leases_active()) {
        // Shared memory: the run's leases end with this transaction (refunded: the deliveries
        // were never counted in the rows). Only fail_work and release_work come here; a claim
        // takes a lapsed run over in shared memory (work_claim_shared.cpp).
        for (const RunAfter& r : runs)
            for (const core::Uuid& id : stream_rest(source, r.consumer, r.stream, r.seq)) {
                bool mismatch = false;
                (void)shm::end({source, id, r.consumer}, r.token, &mismatch);
            }
        return kept;
    }
    std::vector<std::string> consumers;
    std::vector<core::Uuid> streams;
    std::vector<int64_t> seqs, tokens;
    for (const RunAfter& r : runs) {
        consumers.push_back(r.consumer);
        streams.push_back(r.stream);
        seqs.push_back(r.seq);
        tokens.push_back(r.token);
    }
    uint64 rows = void_runs_plan[source].execute(
        {text_array(consumers), uuid_array(streams), int8_array(seqs), int8_array(tokens), BoolGetDatum(refund)});
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        kept.push_back(static_cast<std::size_t>(DatumGetInt64(spi_value(r, 1, &isnull))) - 1);
    }
    return kept;
}

}  // namespace whizbang::pg
