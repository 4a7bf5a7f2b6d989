// The claim's hand-out without SQL (issue 11 item 5): picks read by primary key through the
// index AM, in a snapshot taken now, and formed into claim_work's result rows.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pg/work.h"

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
                                                TimestampTz now, int64_t max_attempts);

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

}  // namespace whizbang::pg
