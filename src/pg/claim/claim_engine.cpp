// The claim algorithm, once for both lease stores (claim_engine.h).
#include <algorithm>
#include <set>

#include "core/partition.h"
#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/claim/claim_engine.h"
#include "pg/boundary/spi.h"

namespace whizbang::pg {
namespace {

// The stream walk and the rows after a head in SQL, for tables the index AM may not read (row
// security): the same rows as StreamWalk, in the same order.
WorkPlan stream_heads_plan = WorkPlan::replanned(
    stream_walk_sql() +
    "SELECT h.message_id, h.consumer::pg_catalog.text, h.attempts, h.stream_id, h.stream_seq, h.scheduled_for,"
    "       h.lease_expiry"
    "  FROM " + stream_heads_from("w.message_id, w.consumer, w.stream_id, w.stream_seq, w.scheduled_for, w.attempts,"
                                  " w.lease_expiry") +
    " WHERE h.scheduled_for OPERATOR(pg_catalog.<=) $1"
    "   AND ($3::pg_catalog.int4[] IS NULL OR whizbang.partition_of(h.stream_id, $4) OPERATOR(pg_catalog.=) ANY ($3))"
    " LIMIT $5",
    {TIMESTAMPTZOID, TEXTOID, INT4ARRAYOID, INT4OID, INT4OID, BOOLOID, TEXTOID, UUIDOID});

WorkPlan followers_plan = WorkPlan::replanned(
    "SELECT h.ord, f.message_id, f.attempts, f.stream_seq, f.scheduled_for, f.lease_expiry"
    "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3))"
    "       WITH ORDINALITY AS h(consumer, stream_id, seq, ord)"
    "  CROSS JOIN LATERAL ("
    "       SELECT f.message_id, f.attempts, f.scheduled_for, f.lease_expiry, f.stream_seq"
    "         FROM whizbang.wh_inbox f"
    "        WHERE f.consumer OPERATOR(pg_catalog.=) h.consumer AND f.stream_id OPERATOR(pg_catalog.=) h.stream_id"
    "          AND f.stream_seq OPERATOR(pg_catalog.>) h.seq AND f.processed_at IS NULL"
    "        ORDER BY f.stream_seq LIMIT $4) f"
    " ORDER BY h.ord, f.stream_seq",
    {TEXTARRAYOID, UUIDARRAYOID, INT8ARRAYOID, INT4OID});

class Engine {
public:
    Engine(const Claim& c, ClaimStore& store) : c_(c), store_(store), partitions_(partition_lookup(c)) {
        if (c_.consumer_null == ' ') consumer_ = text_from_datum(c_.consumer);
    }

    int run() {
        settle(store_.hand_out(store_.preleased(c_.max_rows), false));
        settle(store_.end_round());
        for (int round = 0; round < 8 && room() > 0 && !store_.full(); ++round) {
            dead_ = rejected_ = 0;
            const int handed_before = handed_;
            const bool streams_first = (turns_[static_cast<int>(c_.source)]++ & 1u) == 0;
            std::vector<Pick> picks;
            if (streams_first) take_stream_heads(picks, heads_for(room(picks)));
            // Room kept for the runs of the heads just taken, so that rows without a stream do
            // not crowd out their followers.
            const int reserved = streams_first ? std::min(room(picks), heads_in(picks) * (rows_per_stream() - 1)) : 0;
            if (room(picks) - reserved > 0) append(picks, store_.take_unstreamed(room(picks) - reserved));
            if (!streams_first) take_stream_heads(picks, heads_for(room(picks)));
            const HandOut out = store_.hand_out(picks, true);
            settle(out);
            take_followers(out.heads);
            settle(store_.end_round());
            // A round that dead-lettered leaves room, and so does one whose picks were finished
            // by others between the read and the take: look again. So does one that took few
            // streams and left room: more streams, or the rows without a stream held back for
            // runs that came out shorter.
            if (dead_ == 0 && rejected_ == 0 && handed_ == handed_before) break;
        }
        return handed_;
    }

private:
    int room(const std::vector<Pick>& picks = {}) const {
        return c_.max_rows - handed_ - pending_ - static_cast<int>(picks.size());
    }

    // A claim fills its room from as few streams as it can, a stream's whole run (up to
    // p_max_per_stream) before the next stream's head: a claim that took the head of every
    // stream would leave the other workers nothing at few streams, while its rows would come
    // one or two per stream. How long a run is comes out only once its head is taken, so a
    // claim expects full runs at first and then what its runs so far gave; a round that leaves
    // room takes more heads in the next one.
    int rows_per_stream() const {
        if (c_.max_per_stream <= 1) return 1;
        if (run_heads_ == 0) return c_.max_per_stream;
        return std::max(1, static_cast<int>(run_rows_ / run_heads_));  // rounded down: rather a head too many
    }
    int heads_for(int room) const {
        if (room <= 0) return 0;
        const int per_stream = rows_per_stream();
        return room / per_stream + (room % per_stream != 0 ? 1 : 0);
    }
    static int heads_in(const std::vector<Pick>& picks) {
        return static_cast<int>(std::count_if(picks.begin(), picks.end(), [](const Pick& p) { return p.head; }));
    }
    static void append(std::vector<Pick>& to, std::vector<Pick> more) {
        for (Pick& p : more) to.push_back(std::move(p));
    }
    void settle(const HandOut& out) {
        handed_ += out.handed;
        pending_ += out.pending;
        dead_ += out.dead;
        rejected_ += out.rejected;
    }

    bool in_partitions(const core::Uuid& key) const {
        if (partitions_.empty()) return true;
        const int part = core::partition_of(key, c_.partition_count);
        return part >= 0 && part < static_cast<int>(partitions_.size()) && partitions_[static_cast<std::size_t>(part)];
    }

    Pick pick_of(StreamRow&& r, bool head) const {
        Pick p;
        p.key = {c_.source, r.id, std::move(r.consumer)};
        p.attempts = r.attempts;
        p.stream = r.stream;
        p.seq = r.seq;
        p.due = r.due;
        p.head = head;
        return p;
    }

    // Up to `limit` due stream heads the store may take, from the rotating starting point to
    // the end, then from the start up to that point; moves the starting point past the last
    // stream seen.
    std::vector<Pick> find_stream_heads(int limit) {
        StreamWalk walk;
        if (!walk.open(c_.source)) return find_stream_heads_sql(limit);
        // Where the last claim stopped: every backend's (the shared-memory store), or this one's.
        StreamCursor& cursor = stream_cursor(c_.source);
        StreamCursor shared;
        const bool is_shared = shm::shared_cursor(c_.source, shared);
        StreamCursor start = is_shared ? shared : cursor;
        // A place among another consumer's streams says nothing about this claim's.
        if (consumer_ && start.set && start.consumer != *consumer_) start = StreamCursor{};
        auto keep = [&](const StreamRow& h, bool wrapped) {
            // Past the starting point again: every stream was looked at.
            if (wrapped && start.set && std::make_pair(h.consumer, h.stream) > std::make_pair(start.consumer, start.stream))
                return -1;
            return h.due <= c_.now && in_partitions(h.stream) && store_.free(h) ? 1 : 0;
        };
        // A claim looks at a bounded number of streams; the next one goes on from there.
        const int visits = limit > (INT32_MAX - 64) / 4 ? INT32_MAX : limit * 4 + 64;
        StreamCursor last;
        std::vector<StreamRow> rows =
            walk.heads(start, consumer_, limit, visits, [&](const StreamRow& h) { return keep(h, false); }, last);
        if (static_cast<int>(rows.size()) < limit && start.set && !last.set) {
            std::vector<StreamRow> more = walk.heads(StreamCursor{}, consumer_, limit - static_cast<int>(rows.size()), visits,
                                                     [&](const StreamRow& h) { return keep(h, true); }, last);
            for (StreamRow& r : more) rows.push_back(std::move(r));
        }
        cursor = last;
        if (is_shared || shared_leases_active()) shm::set_shared_cursor(c_.source, last);
        std::vector<Pick> found;
        found.reserve(rows.size());
        for (StreamRow& r : rows) found.push_back(pick_of(std::move(r), true));
        return found;
    }

    std::vector<Pick> find_stream_heads_sql(int limit) {
        std::vector<Pick> found;
        std::set<std::pair<core::Uuid, std::string>> seen;
        walk_stream_heads(c_, stream_heads_plan[c_.source], limit, [&](uint64 r, StreamCursor& at) {
            bool isnull = false, no_lease = false;
            StreamRow h;
            h.id = uuid_from_datum(spi_value(r, 1, &isnull));
            h.consumer = text_from_datum(spi_value(r, 2, &isnull));
            h.attempts = DatumGetInt32(spi_value(r, 3, &isnull));
            h.stream = uuid_from_datum(spi_value(r, 4, &isnull));
            h.seq = DatumGetInt64(spi_value(r, 5, &isnull));
            h.due = DatumGetTimestampTz(spi_value(r, 6, &isnull));
            Datum lease = spi_value(r, 7, &no_lease);
            if (!no_lease) h.lease = DatumGetTimestampTz(lease);
            at.consumer = h.consumer;
            at.stream = h.stream;
            if (!seen.insert({h.id, h.consumer}).second || !store_.free(h)) return false;
            found.push_back(pick_of(std::move(h), true));
            return true;
        });
        return found;
    }

    // Takes up to `max_heads` stream heads, earliest due first among those found (as a claim
    // hands rows out). Heads another claim takes first are passed over and the walk goes on
    // past them, a few times at most, instead of answering short while heads are free.
    void take_stream_heads(std::vector<Pick>& picks, int max_heads) {
        std::set<std::pair<core::Uuid, std::string>> tried;
        int taken = 0;
        for (int attempt = 0; attempt < 4 && room(picks) > 0 && taken < max_heads && !store_.full(); ++attempt) {
            // As many as it may take: the walk passes over streams held right now, and the next
            // claim goes on after the last one looked at (shared by every backend where the
            // store has shared memory), so a head is rarely taken by another claim first.
            const int want = std::min(room(picks), max_heads - taken);
            const int wanted = want;
            std::vector<Pick> found = find_stream_heads(wanted);
            std::stable_sort(found.begin(), found.end(), [](const Pick& a, const Pick& b) { return a.due < b.due; });
            std::vector<Pick> fresh;
            for (Pick& h : found)
                if (tried.insert({h.key.id, h.key.consumer}).second) fresh.push_back(h);
            if (fresh.empty()) break;
            std::vector<Pick> heads = store_.take_heads(fresh, want);
            taken += static_cast<int>(heads.size());
            append(picks, std::move(heads));
            if (static_cast<int>(found.size()) < wanted) break;  // every stream was looked at
        }
    }

    // The consecutive due, free rows after each head handed out, at most p_max_per_stream - 1
    // per stream; a row that is not, or that the store cannot take, ends its stream's run.
    void take_followers(const std::vector<Pick>& heads) {
        if (heads.empty() || room() <= 0 || c_.max_per_stream <= 1) return;
        const int per_stream = std::min(c_.max_per_stream - 1, room());
        std::vector<std::vector<Pick>> runs(heads.size());
        std::vector<char> ended(heads.size(), 0);
        auto add = [&](std::size_t h, StreamRow&& r) {
            if (ended[h]) return;
            // A row that is not due or not free ends the run: the rows after it wait for it.
            if (runs[h].size() >= static_cast<std::size_t>(per_stream) || r.due > c_.now || !store_.free(r)) {
                ended[h] = 1;
                return;
            }
            runs[h].push_back(pick_of(std::move(r), false));
        };
        StreamWalk walk;
        if (walk.open(c_.source)) {
            for (std::size_t h = 0; h < heads.size(); ++h)
                for (StreamRow& r : walk.after(heads[h].key.consumer, *heads[h].stream, heads[h].seq, per_stream)) add(h, std::move(r));
            walk.close();
        } else {
            std::vector<std::string> consumers;
            std::vector<core::Uuid> streams;
            std::vector<int64_t> seqs;
            for (const Pick& h : heads) {
                consumers.push_back(h.key.consumer);
                streams.push_back(*h.stream);
                seqs.push_back(h.seq);
            }
            uint64 rows = followers_plan[c_.source].execute_latest(
                {text_array(consumers), uuid_array(streams), int8_array(seqs), Int32GetDatum(per_stream)});
            std::vector<std::pair<std::size_t, StreamRow>> found;
            for (uint64 r = 0; r < rows; ++r) {
                bool isnull = false, no_lease = false;
                const std::size_t h = static_cast<std::size_t>(DatumGetInt64(spi_value(r, 1, &isnull))) - 1;
                StreamRow f;
                f.id = uuid_from_datum(spi_value(r, 2, &isnull));
                f.consumer = heads[h].key.consumer;
                f.attempts = DatumGetInt32(spi_value(r, 3, &isnull));
                f.stream = *heads[h].stream;
                f.seq = DatumGetInt64(spi_value(r, 4, &isnull));
                f.due = DatumGetTimestampTz(spi_value(r, 5, &isnull));
                Datum lease = spi_value(r, 6, &no_lease);
                if (!no_lease) f.lease = DatumGetTimestampTz(lease);
                found.emplace_back(h, std::move(f));
            }
            for (auto& [h, f] : found) add(h, std::move(f));
        }
        std::vector<Pick> picks = store_.take_runs(runs, room());
        run_heads_ += heads.size();
        run_rows_ += heads.size() + picks.size();
        settle(store_.hand_out(picks, true));
    }

    static inline unsigned turns_[2] = {};  // per source: which kind of row fills a claim first

    const Claim& c_;
    ClaimStore& store_;
    std::optional<std::string> consumer_;
    std::vector<char> partitions_;  // by partition number; empty: every partition
    int handed_ = 0, pending_ = 0, dead_ = 0, rejected_ = 0;
    std::size_t run_heads_ = 0, run_rows_ = 0;  // heads whose runs were taken, and their rows in all
};

}  // namespace

std::vector<char> partition_lookup(const Claim& c) {
    std::vector<char> partitions;
    if (c.partitions_null != ' ') return partitions;
    partitions.assign(static_cast<std::size_t>(c.partition_count), 0);
    for (int p : int4_array_values(c.partitions))
        if (p >= 0 && p < c.partition_count) partitions[static_cast<std::size_t>(p)] = 1;
    return partitions;
}

// Drops the entries just handed back. Stale ones (completed, or re-claimed by another instance
// after the lease lapsed) are never handed back and are purged by perform_maintenance, so a
// claim that got nothing pre-leased writes nothing here.
void forget_preleased(Source source, const core::Uuid& instance, const std::vector<core::Uuid>& ids,
                      const std::vector<std::string>& consumers) {
    static WorkPlan plan(
        "DELETE FROM whizbang.wh_inbox_preleased p"
        " WHERE p.instance_id OPERATOR(pg_catalog.=) $1"
        "   AND (p.message_id, p.consumer) OPERATOR(pg_catalog.=) ANY ("
        "        SELECT * FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)))",
        {UUIDOID, UUIDARRAYOID, TEXTARRAYOID});
    if (ids.empty()) return;
    plan[source].execute({PointerGetDatum(instance.data()), uuid_array(ids), text_array(consumers)});
}

int run_claim(const Claim& c, ClaimStore& store) { return Engine(c, store).run(); }

}  // namespace whizbang::pg
