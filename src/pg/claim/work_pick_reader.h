// The claim's hand-out without SQL (issue 11 item 5): picks read by primary key through the
// index AM, in a snapshot taken now, and formed into claim_work's result rows.
#pragma once

#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "pg/claim/retry_policies.h"
#include "pg/claim/work.h"

namespace whizbang::pg {

struct PickToRead {
    const shm::LeaseKey* key;
    int64_t token;
    TimestampTz expiry;
    bool head;  // must still be its stream's oldest unfinished row
};

struct PickRead {
    char state = 0;     // 0: not claimable now, 1: handed out, 2: out of attempts (dead letter)
    int attempts = 0;   // this delivery's
    int64_t seq = 0;    // its stream position (0 without a stream)
    HeapTuple row = nullptr;  // state 1: the result row, in `result_desc`
};

// nullopt when the tables cannot be read this way (row security, a changed shape): the caller
// reads them with SQL. Checks the caller's SELECT privilege as a query would.
std::optional<std::vector<PickRead>> read_picks(Source source, TupleDesc result_desc, const std::vector<PickToRead>& picks,
                                                TimestampTz now, const RetryPolicies& policies);

// The re-read's check for the SQL path (row security): whether another transaction is deleting
// or updating each row version (by its ctid in the work table of `source`) right now — the
// predicate read_picks applies, so both re-reads pass over the same rows (a completion held in
// PREPARE TRANSACTION across a restart, whose lease is gone, among them).
std::vector<char> rows_changing_elsewhere(Source source, const std::vector<ItemPointerData>& tids);

// Due rows without a stream, oldest due first, read through the due index (no statement): the
// claim's candidates. Rows whose lease is live right now are passed over at the cost of a hash
// probe, so a claim behind many leased rows does not pay for reading them out.
struct DueRow {
    core::Uuid id{};
    std::string consumer;
    int attempts = 0;
};
class DueRowScan {
public:
    // False (nothing opened) when the table cannot be read this way: the caller uses SQL.
    bool open(Source source, TimestampTz now);
    // Up to `want` more candidates, of `consumer` (all when nullopt) and of `partitions` (all when
    // empty; a row's partition is partition_of(message_id, partition_count)).
    std::vector<DueRow> next(int want, const std::optional<std::string>& consumer, const std::vector<char>& partitions,
                             int partition_count);
    void close();

private:
    Source source_ = Source::inbox;
    TimestampTz now_ = 0;
    Relation heap_ = nullptr, index_ = nullptr;
    IndexScanDesc scan_ = nullptr;
    TupleTableSlot* slot_ = nullptr;
    Snapshot snapshot_ = nullptr;
    int id_col_ = 0, consumer_col_ = 0, attempts_col_ = 0;
    bool done_ = false;
};

// The stream index (wh_inbox_stream / wh_outbox_stream: consumer, stream_id,
// stream_seq of unfinished rows) read through the index AM, in one snapshot taken at open():
// the heads of the streams, stream after stream, each found by one descent of the index (a loose
// index scan, as the SQL walk was), and the rows after a head, in order. No statement is planned.
struct StreamRow {
    core::Uuid id{};
    std::string consumer;
    int attempts = 0;
    core::Uuid stream{};
    int64_t seq = 0;
    TimestampTz due = 0;                 // scheduled_for
    std::optional<TimestampTz> lease;    // lease_expiry of the row (the table store's lease)
};
class StreamWalk {
public:
    // False (nothing opened) when the table cannot be read this way: the caller uses SQL.
    bool open(Source source);
    // The heads of the streams after `from` (from the first stream when !from.set), of
    // `consumer` (nullopt: every consumer), in index order: keep(head) says whether to keep it
    // (1), pass it over (0) or stop before it (-1). Stops at the end of the index, when `wanted`
    // were kept, or after `max_visits` streams; `last` is the last stream looked at (unset: the
    // end was reached).
    template <typename Keep>
    std::vector<StreamRow> heads(const StreamCursor& from, const std::optional<std::string>& consumer, int wanted,
                                 int max_visits, Keep keep, StreamCursor& last) {
        std::vector<StreamRow> out;
        last = from;
        for (int visits = 0; static_cast<int>(out.size()) < wanted && visits < max_visits; ++visits) {
            std::optional<StreamRow> head = next_head(last, consumer);
            if (!head) {
                last = StreamCursor{};
                break;
            }
            const int verdict = keep(*head);
            if (verdict < 0) break;
            last.consumer = head->consumer;
            last.stream = head->stream;
            last.set = true;
            if (verdict > 0) out.push_back(std::move(*head));
        }
        return out;
    }
    // Up to `max` unfinished rows of a stream after `seq`, in stream order.
    std::vector<StreamRow> after(const std::string& consumer, const core::Uuid& stream, int64_t seq, int max);
    void close();
    // Closed when the walk goes out of scope normally; after an error the transaction's abort
    // releases what it holds.
    ~StreamWalk() {
        if (!heap_) return;
        if (std::uncaught_exceptions() > 0) return;
        try {
            close();
        } catch (...) {
        }
    }

private:
    std::optional<StreamRow> next_head(const StreamCursor& after, const std::optional<std::string>& consumer);
    bool read(StreamRow& row);  // the slot's row (false: a row without a stream)
    // The scan with `nkeys` keys: a btree scan is rescanned with as many keys as it began with.
    IndexScanDesc scan(int nkeys);

    Relation heap_ = nullptr, index_ = nullptr;
    IndexScanDesc scans_[4] = {};
    TupleTableSlot* slot_ = nullptr;
    Snapshot snapshot_ = nullptr;
    int id_col_ = 0, consumer_col_ = 0, attempts_col_ = 0, stream_col_ = 0, seq_col_ = 0, due_col_ = 0, lease_col_ = 0;
};

}  // namespace whizbang::pg
