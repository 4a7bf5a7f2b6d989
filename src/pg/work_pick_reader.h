// The claim's hand-out without SQL (issue 11 item 5): picks read by primary key through the
// index AM, in a snapshot taken now, and formed into claim_work's result rows.
#pragma once

#include <optional>
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

}  // namespace whizbang::pg
