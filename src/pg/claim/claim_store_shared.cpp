// claim_work's lease store in shared memory (DESIGN §3.8, claim_engine.h): take, then verify.
//
// Candidates are read without row locks (a cursor, in the order the table store hands rows
// out), each lease is taken in the shared table — one holder wins, the others skip the row —
// and only then are the rows read again, in a snapshot taken after the leases were taken: a row
// that another transaction completed, failed or cancelled meanwhile (its lease was removed at
// that commit, so the take found it free) is no longer due there, and its lease is dropped.
// Nothing is written unless a lapsed lease is taken over (its delivery is counted in the row)
// or a row goes to the dead letters.
//
// Per-stream order keeps the table store's rule (work_runs.cpp): the head's lease is the
// stream's lease. A stream's rows are handed out only from its head, a head is checked to be
// the oldest unfinished row after its lease is taken, and taking over a lapsed head voids the
// old holder's run in that stream, whole or not at all.
#include <algorithm>
#include <set>

#include "core/partition.h"
#include "pg/claim/retry_policies.h"
#include "pg/ops/counters.h"
#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/lease/lease_store.h"
#include "pg/boundary/spi.h"
#include "pg/claim/work.h"
#include "pg/claim/claim_engine.h"
#include "pg/claim/work_pick_reader.h"

namespace whizbang::pg {
namespace {

// Due rows without a stream, oldest due first; leased ones are skipped in shared memory.
WorkPlan unstreamed_plan = WorkPlan::replanned(
    "SELECT w.message_id, w.consumer::pg_catalog.text, w.attempts"
    "  FROM whizbang.wh_inbox w"
    " WHERE w.processed_at IS NULL AND w.stream_id IS NULL AND w.scheduled_for OPERATOR(pg_catalog.<=) $1"
    "   AND ($2::pg_catalog.text IS NULL OR w.consumer OPERATOR(pg_catalog.=) $2)"
    "   AND ($3::pg_catalog.int4[] IS NULL OR whizbang.partition_of(w.message_id, $4) OPERATOR(pg_catalog.=) ANY ($3))"
    " ORDER BY w.scheduled_for",
    {TIMESTAMPTZOID, TEXTOID, INT4ARRAYOID, INT4OID});

// Rows stored pre-leased to this instance (their leases were taken by the store).
WorkPlan preleased_plan(
    "SELECT w.message_id, w.consumer::pg_catalog.text, w.attempts, p.lease_token"
    "  FROM whizbang.wh_inbox_preleased p JOIN whizbang.wh_inbox w"
    "    ON w.message_id OPERATOR(pg_catalog.=) p.message_id AND w.consumer OPERATOR(pg_catalog.=) p.consumer"
    " WHERE p.instance_id OPERATOR(pg_catalog.=) $1 AND w.processed_at IS NULL"
    "   AND ($2::pg_catalog.text IS NULL OR w.consumer OPERATOR(pg_catalog.=) $2)"
    "   AND ($3::pg_catalog.int4[] IS NULL OR whizbang.partition_of(COALESCE(w.stream_id, w.message_id), $4)"
    "        OPERATOR(pg_catalog.=) ANY ($3))"
    " ORDER BY w.stream_id, w.stream_seq LIMIT $5",
    {UUIDOID, TEXTOID, INT4ARRAYOID, INT4OID, INT4OID});


// The picks that are still claimable, read after their leases were taken, with their message:
// claim_work's result columns, then the row's stream position. A head must still be the oldest
// unfinished row of its stream.
const char* const kPicks =
    "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4),"
    "                  pg_catalog.unnest($5)) WITH ORDINALITY AS u(id, consumer, token, expiry, head, ord)"
    "  JOIN whizbang.wh_inbox w"
    "    ON w.message_id OPERATOR(pg_catalog.=) u.id AND w.consumer OPERATOR(pg_catalog.=) u.consumer";
const char* const kStillClaimable =
    " WHERE w.processed_at IS NULL AND w.scheduled_for OPERATOR(pg_catalog.<=) $6"
    "   AND (NOT u.head OR w.stream_id IS NULL OR NOT EXISTS ("
    "        SELECT 1 FROM whizbang.wh_inbox o"
    "         WHERE o.consumer OPERATOR(pg_catalog.=) w.consumer AND o.stream_id OPERATOR(pg_catalog.=) w.stream_id"
    "           AND o.stream_seq OPERATOR(pg_catalog.<) w.stream_seq AND o.processed_at IS NULL))"
    " ORDER BY u.ord";
// claim_work's result columns: from the row itself, or in the split layout (before 0.14.0)
// from the message row `m` joined to the work row.
std::string hand_out_sql(Source source, bool split) {
    const char* m = split ? "m." : "w.";
    std::string sql = source == Source::inbox
        ? std::string("SELECT 'inbox'::pg_catalog.text, w.message_id, w.stream_id, w.partition_number, ") + m +
              "handler_name, NULL::pg_catalog.text, " + m + "message_type, " + m + "envelope, " + m + "metadata, " + m +
              "scope, w.attempts OPERATOR(pg_catalog.+) 1, u.token, u.expiry, w.consumer::pg_catalog.text,"
              "       w.stream_seq, u.ord, w.ctid"
        : std::string("SELECT 'outbox'::pg_catalog.text, w.message_id, w.stream_id, w.partition_number,"
                      "       NULL::pg_catalog.text, ") + m + "destination, " + m + "message_type, " + m + "event_data, " + m +
              "metadata, " + m + "scope, w.attempts OPERATOR(pg_catalog.+) 1, u.token, u.expiry, NULL::pg_catalog.text,"
              "       w.stream_seq, u.ord, w.ctid";
    sql += source == Source::inbox ? kPicks : outbox_twin(kPicks);
    if (split)
        sql += source == Source::inbox
            ? "  JOIN whizbang.wh_inbox/*message*/ m"
              "    ON m.message_id OPERATOR(pg_catalog.=) w.message_id AND m.consumer OPERATOR(pg_catalog.=) w.consumer"
            : "  JOIN whizbang.wh_outbox/*message*/ m ON m.message_id OPERATOR(pg_catalog.=) w.message_id";
    sql += source == Source::inbox ? kStillClaimable : outbox_twin(kStillClaimable);
    return split ? split_twin(sql) : sql;
}
CachedPlan hand_out_plan(Source source) {
    CachedPlan plan = CachedPlan::replanned(hand_out_sql(source, false),
                                            {UUIDARRAYOID, TEXTARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID, BOOLARRAYOID,
                                             TIMESTAMPTZOID});
    plan.split_as(hand_out_sql(source, true));
    return plan;
}
CachedPlan hand_out_plans[2] = {hand_out_plan(Source::inbox), hand_out_plan(Source::outbox)};
constexpr int kResultColumns = 14, kAttemptsColumn = 11, kTokenColumn = 12, kSeqColumn = 15, kOrdColumn = 16,
              kCtidColumn = 17;

// One claim_work call's work on one source, with leases in shared memory.
class SharedStore : public ClaimStore {
public:
    SharedStore(const Claim& c, const RetryPolicies& policies, SharedHandOut& out)
        : c_(c), policies_(policies), out_(out), token_(shm::provisional_token()) {}

    std::vector<Pick> preleased(int room) override {
        const char nulls[] = {' ', c_.consumer_null, c_.partitions_null, ' ', ' ', '\0'};
        uint64 rows = preleased_plan[c_.source].execute({PointerGetDatum(c_.instance.data()), c_.consumer, c_.partitions,
                                                         Int32GetDatum(c_.partition_count), Int32GetDatum(room)},
                                                        nulls);
        std::vector<Pick> picks;
        std::vector<core::Uuid> ids;
        std::vector<std::string> consumers;
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false;
            Pick p;
            p.key = {c_.source, uuid_from_datum(spi_value(r, 1, &isnull)), text_from_datum(spi_value(r, 2, &isnull))};
            p.token = DatumGetInt64(spi_value(r, 4, &isnull));
            ids.push_back(p.key.id);
            consumers.push_back(p.key.consumer);
            // Still this instance's lease from the store, unless it lapsed or was taken over:
            // extended to the claim's expiry at once, so no other claim takes it over meanwhile.
            if (!shm::extend_live(p.key, p.token, c_.instance, c_.now, c_.expiry)) continue;
            p.expiry = c_.expiry;
            picks.push_back(std::move(p));
        }
        forget_preleased(c_.source, c_.instance, ids, consumers);
        // Their leases were taken by the store, not by this call (hand_out(..., false)): a row no
        // longer claimable keeps its lease until it lapses, as in the table store.
        return picks;
    }

    std::vector<Pick> take_unstreamed(int room) override {
        std::vector<Pick> picks;
        DueRowScan scan;
        if (!scan.open(c_.source, c_.now)) return take_unstreamed_sql(room);
        const std::optional<std::string> consumer =
            c_.consumer_null == ' ' ? std::optional<std::string>(text_from_datum(c_.consumer)) : std::nullopt;
        const std::vector<char> partitions = partition_lookup(c_);
        if (c_.partitions_null == ' ' && std::find(partitions.begin(), partitions.end(), 1) == partitions.end()) {
            scan.close();
            return picks;  // no partition of this claim exists
        }
        auto left = [&] { return room - static_cast<int>(picks.size()); };
        while (left() > 0 && !full_) {
            std::vector<DueRow> rows = scan.next(left() + 8, consumer, partitions, c_.partition_count);
            if (rows.empty()) break;
            for (DueRow& r : rows) {
                if (left() <= 0 || full_) break;
                shm::LeaseKey key{c_.source, r.id, std::move(r.consumer)};
                if (!take_one(key, r.attempts, std::nullopt, 0)) continue;
                picks.push_back(taken(std::move(key), r.attempts, std::nullopt, 0, false));
            }
        }
        scan.close();
        return picks;
    }

    // The same with SQL (row security on the work table).
    std::vector<Pick> take_unstreamed_sql(int room) {
        std::vector<Pick> picks;
        const char nulls[] = {' ', c_.consumer_null, c_.partitions_null, ' ', '\0'};
        Portal cursor = unstreamed_plan[c_.source].open_cursor(
            {TimestampTzGetDatum(c_.now), c_.consumer, c_.partitions, Int32GetDatum(c_.partition_count)}, nulls);
        long batch = std::max(room * 2L, 32L);
        auto left = [&] { return room - static_cast<int>(picks.size()); };
        while (left() > 0 && !full_) {
            uint64 rows = spi_fetch(cursor, batch);
            // Read the batch first: take_one may run SPI, which replaces the fetched rows.
            std::vector<std::pair<shm::LeaseKey, int>> found;
            for (uint64 r = 0; r < rows; ++r) {
                bool isnull = false;
                found.push_back({{c_.source, uuid_from_datum(spi_value(r, 1, &isnull)), text_from_datum(spi_value(r, 2, &isnull))},
                                 DatumGetInt32(spi_value(r, 3, &isnull))});
            }
            for (const auto& [key, attempts] : found) {
                if (left() <= 0 || full_) break;
                if (!take_one(key, attempts, std::nullopt, 0)) continue;
                picks.push_back(taken(key, attempts, std::nullopt, 0, false));
            }
            if (rows < static_cast<uint64>(batch)) break;
            batch = std::min(batch * 4, 100000L);
        }
        spi_close(cursor);
        return picks;
    }

    bool free(const StreamRow& row) override { return !shm::held_now({c_.source, row.id, row.consumer}, c_.now); }

    std::vector<Pick> take_heads(const std::vector<Pick>& heads, int room) override {
        std::vector<Pick> picks;
        for (const Pick& h : heads) {
            if (static_cast<int>(picks.size()) >= room || full_) break;
            if (take_one(h.key, h.attempts, h.stream, h.seq)) picks.push_back(taken(h.key, h.attempts, h.stream, h.seq, true));
        }
        return picks;
    }

    std::vector<Pick> take_runs(const std::vector<std::vector<Pick>>& runs, int room) override {
        std::vector<Pick> picks;
        for (const std::vector<Pick>& run : runs)
            for (const Pick& f : run) {
                if (static_cast<int>(picks.size()) >= room) return picks;
                shm::Lease old;
                const shm::Take took = shm::take(f.key, fresh(f.attempts + 1, f.stream, f.seq), c_.now, &old);
                if (took != shm::Take::taken) {
                    full_ = full_ || took == shm::Take::full;
                    break;  // the rest of the run waits for this row
                }
                picks.push_back(taken(f.key, f.attempts, f.stream, f.seq, false));
            }
        return picks;
    }

    // Reads the picks again in a fresh snapshot and hands out those still claimable (or dead
    // letters those out of attempts); drops the leases of the others when this call took them.
    // Returns the stream heads handed out.
    HandOut hand_out(const std::vector<Pick>& picks, bool taken_here) override {
        HandOut done;
        if (picks.empty()) return done;
        std::vector<core::Uuid> ids;
        std::vector<std::string> consumers;
        std::vector<int64_t> tokens;
        std::vector<TimestampTz> expiries;
        std::vector<char> head_flags;
        for (const Pick& p : picks) {
            ids.push_back(p.key.id);
            consumers.push_back(p.key.consumer);
            tokens.push_back(p.token);
            expiries.push_back(p.expiry);
            head_flags.push_back(p.head);
        }
        std::vector<PickRead> read = read_all(picks, ids, consumers, tokens, expiries, head_flags);
        std::vector<core::Uuid> dead_ids;
        std::vector<std::string> dead_consumers;
        std::vector<char> claimable(picks.size(), 0);
        std::vector<int> attempts(picks.size(), 0);
        std::vector<int64_t> seqs(picks.size(), 0);
        for (std::size_t i = 0; i < picks.size(); ++i) {
            claimable[i] = read[i].state;
            attempts[i] = read[i].attempts;
            seqs[i] = read[i].seq;
            if (read[i].state != 1) continue;
            // Kept until the call's token is drawn (finish_shared_claim).
            out_.rows.push_back(read[i].row);
            out_.descs.push_back(read_desc_);
            out_.provisional.push_back(taken_here);
            out_.keys.push_back(picks[i].key);
        }
        for (std::size_t i = 0; i < picks.size(); ++i) {
            const Pick& p = picks[i];
            if (claimable[i] == 1) {
                ++done.handed;
                shm::set_delivery(p.key, p.token, attempts[i], p.expiry);
                if (p.head && p.stream && c_.max_per_stream > 1) {
                    done.heads.push_back(p);
                    done.heads.back().seq = seqs[i];
                }
            } else if (claimable[i] == 2) {
                bool mismatch = false;
                (void)shm::end(p.key, p.token, &mismatch);  // gone with the row when this commits
                dead_ids.push_back(p.key.id);
                dead_consumers.push_back(p.key.consumer);
            } else if (taken_here) {
                shm::drop(p.key, p.token);
                ++done.rejected;
            }
        }
        done.dead = static_cast<int>(dead_ids.size());
        dead_letter(c_.source, dead_ids, dead_consumers, std::vector<std::optional<std::string>>(dead_ids.size()), c_.now);
        return done;
    }

    bool full() const override { return full_; }

private:
    int64_t token() const { return token_; }

    shm::Lease fresh(int attempts, const std::optional<core::Uuid>& stream, int64_t seq) {
        shm::Lease l;
        l.instance = c_.instance;
        l.token = token();
        l.expiry = c_.expiry;
        l.attempts = attempts;
        l.has_stream = stream.has_value();
        if (stream) l.stream = *stream;
        l.seq = seq;
        return l;
    }

    // A pick whose lease this claim has just taken.
    Pick taken(shm::LeaseKey key, int attempts, const std::optional<core::Uuid>& stream, int64_t seq, bool head) const {
        Pick p;
        p.key = std::move(key);
        p.attempts = attempts;
        p.stream = stream;
        p.seq = seq;
        p.head = head;
        p.token = token();
        p.expiry = c_.expiry;
        return p;
    }

    // Takes the lease of one candidate; a lapsed one is taken over (a stream head voids the old
    // holder's run). Returns whether the pick is ours now.
    bool take_one(const shm::LeaseKey& key, int attempts, const std::optional<core::Uuid>& stream, int64_t seq) {
        shm::Lease old;
        const shm::Lease lease = fresh(attempts + 1, stream, seq);
        switch (shm::take(key, lease, c_.now, &old)) {
            case shm::Take::taken:
                return true;
            case shm::Take::held:
                return false;
            case shm::Take::full:
                full_ = true;
                return false;
            case shm::Take::lapsed:
                break;
        }
        std::vector<shm::LeaseKey> run;
        if (stream)
            for (const core::Uuid& id : stream_rest(c_.source, key.consumer, *stream, seq)) run.push_back({c_.source, id, key.consumer});
        std::vector<std::pair<shm::LeaseKey, shm::Lease>> voided;
        if (!shm::take_over(key, old.token, lease, c_.now, run, &voided)) return false;
        // The lapsed deliveries count (DESIGN §3.8): written to the rows, the only place they last.
        voided.emplace_back(key, old);
        std::vector<core::Uuid> ids;
        std::vector<std::string> consumers;
        std::vector<int> attempts_done;
        for (const auto& [k, l] : voided) {
            ids.push_back(k.id);
            consumers.push_back(k.consumer);
            attempts_done.push_back(l.attempts);
        }
        write_attempts(c_.source, ids, consumers, attempts_done);
        return true;
    }

    // The picks read again in a snapshot taken now: by primary key through the index AM
    // (work_pick_reader.cpp), or with SQL where the tables cannot be read that way.
    std::vector<PickRead> read_all(const std::vector<Pick>& picks, const std::vector<core::Uuid>& ids,
                                   const std::vector<std::string>& consumers, const std::vector<int64_t>& tokens,
                                   const std::vector<TimestampTz>& expiries, const std::vector<char>& head_flags) {
        std::vector<PickToRead> to_read;
        for (const Pick& p : picks) to_read.push_back({&p.key, p.token, p.expiry, p.head});
        if (std::optional<std::vector<PickRead>> read = read_picks(c_.source, out_.result_desc, to_read, c_.now, policies_)) {
            read_desc_ = out_.result_desc;
            return std::move(*read);
        }
        std::vector<PickRead> read(picks.size());
        uint64 rows = hand_out_plans[static_cast<int>(c_.source)].execute_latest(
            {uuid_array(ids), text_array(consumers), int8_array(tokens), timestamptz_array(expiries),
             bool_array(head_flags), TimestampTzGetDatum(c_.now)});
        std::vector<ItemPointerData> tids(rows);
        pg_call([&] {
            TupleDesc desc = SPI_tuptable->tupdesc;
            read_desc_ = desc;
            for (uint64 r = 0; r < rows; ++r) {
                bool isnull = false;
                tids[r] = *reinterpret_cast<ItemPointer>(DatumGetPointer(SPI_getbinval(SPI_tuptable->vals[r], desc, kCtidColumn, &isnull)));
            }
        });
        const std::vector<char> changing = rows_changing_elsewhere(c_.source, tids);
        pg_call([&] {
            TupleDesc desc = SPI_tuptable->tupdesc;
            for (uint64 r = 0; r < rows; ++r) {
                if (changing[r]) continue;  // being deleted or updated elsewhere: as read_picks
                HeapTuple t = SPI_tuptable->vals[r];  // SPI's tuple table lives until SPI_finish
                bool isnull = false;
                const auto i = static_cast<std::size_t>(DatumGetInt64(SPI_getbinval(t, desc, kOrdColumn, &isnull))) - 1;
                PickRead& pr = read[i];
                pr.attempts = DatumGetInt32(SPI_getbinval(t, desc, kAttemptsColumn, &isnull));
                Datum seq = SPI_getbinval(t, desc, kSeqColumn, &isnull);
                pr.seq = isnull ? 0 : DatumGetInt64(seq);
                pr.state = pr.attempts > policies_.of(to_read[i].key->consumer).max_attempts ? 2 : 1;
                pr.row = t;
            }
        });
        return read;
    }

    const Claim& c_;
    const RetryPolicies& policies_;
    SharedHandOut& out_;
    const int64_t token_;  // provisional until finish_shared_claim
    TupleDesc read_desc_ = nullptr;  // of the rows read_all returned last
    bool full_ = false;
};

}  // namespace

int claim_shared(const Claim& c, const RetryPolicies& policies, SharedHandOut& out) {
    SharedStore store(c, policies, out);
    const int handed = run_claim(c, store);
    if (store.full()) shm::count_short_claim();
    return handed;
}

// Fencing tokens must grow with every new holder of a row or stream (DESIGN §3.8). A claim takes
// its leases one after the other, over several rounds; had it drawn its token first, a claim
// that began earlier but took a stream later — after another claim with a newer token had held
// it and let it go — would hold it with the older token. So the leases carry a provisional
// token while they are taken, and the token is drawn after the last one: later than the token
// of every earlier holder of those rows (drawn before that holder's claim returned).
void finish_shared_claim(SharedHandOut& out, ReturnSetInfo* rsinfo) {
    if (out.rows.empty()) return;
    bool any = false;
    for (char p : out.provisional) any = any || p;
    const int64_t provisional = shm::provisional_token();
    const int64_t token = any ? shm::next_token() : 0;
    for (std::size_t i = 0; i < out.rows.size(); ++i)
        if (out.provisional[i]) shm::retoken(out.keys[i], provisional, token);
    pg_call([&] {
        Datum values[kResultColumns];
        bool nulls[kResultColumns];
        for (std::size_t i = 0; i < out.rows.size(); ++i) {
            for (int col = 0; col < kResultColumns; ++col)
                values[col] = SPI_getbinval(out.rows[i], out.descs[i], col + 1, &nulls[col]);
            if (out.provisional[i]) values[kTokenColumn - 1] = Int64GetDatum(token);
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
    });
    if (!out.keys.empty())
        count_rows(out.keys.front().source, core::Counter::claimed, out.keys.size(),
                   [&](std::size_t i) { return out.keys[i].consumer; });
}

}  // namespace whizbang::pg
