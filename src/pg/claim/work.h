// Shared by the work-coordination functions (work.cpp, work_outcomes.cpp, the store paths).
//
// The inbox and the outbox keep their work state in tables of one shape (wh_inbox /
// wh_outbox, and their _streams and _preleased companions; the outbox's consumer column
// is always ''), so one claim engine serves both: a statement over those tables is written
// once, for the inbox, and prepared a second time with the outbox's table names.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/uuid.h"
#include "pg/boundary/bridge.h"
#include "pg/lease/lease_store.h"
#include "pg/boundary/spi.h"

namespace whizbang::pg {

enum class Source { inbox = 0, outbox = 1 };

const char* source_name(Source source);

// p_source: 'inbox' or 'outbox'; NULL (where allowed) means every source and returns nullopt.
// 'outbox' in a database whose whizbang predates it (0.3.0, not updated yet) is 0A000.
std::optional<Source> source_arg(FunctionCallInfo fcinfo, int argno, bool allow_null);

// The work-state table of `source` in this database, InvalidOid when it does not exist: the
// library serves databases whose extension has not been updated yet.
Oid work_table(Source source);
bool outbox_installed();

// A fresh fencing token from wh_lease_token_seq (claims, and pre-leased stores).
int64_t next_lease_token();

// `sql` with every "whizbang.wh_inbox_" table replaced by its "whizbang.wh_outbox_" twin.
std::string outbox_twin(const std::string& sql);

// The loose index scan of wh_inbox_stream that both claim paths start from: a recursive
// CTE "streams" of each (consumer, stream_id) with unfinished rows, $2 the consumer (NULL: all),
// from the first stream when $6, else from after ($7, $8). Their statements go on from it.
std::string stream_walk_sql();

// The head (oldest unfinished row) of each stream of that walk, as `h` with `columns` of
// wh_inbox `w`: the FROM item "streams s CROSS JOIN LATERAL (...) h" of the statements that
// go on from stream_walk_sql().
std::string stream_heads_from(const std::string& columns);

// A position in the stream walk: the stream of the last head a claim looked at.
struct StreamCursor {
    std::string consumer;
    core::Uuid stream{};
    bool set = false;
};

struct Claim;

// Where this backend's next walk of the streams of `source` starts: after the last stream it
// looked at, so a deep backlog of streams is served in turn rather than lowest id first.
StreamCursor& stream_cursor(Source source);

// Runs `plan` (stream_walk_sql() with $1 now, $2 consumer, $3/$4 partitions, $5 the row limit)
// from where this backend's previous walk of c.source stopped to the end, then from the start,
// until `limit` rows were counted; `row(r, position)` sets the stream of result row r and says
// whether it counts (a head not seen before). Moves the starting point past the last stream.
void walk_stream_heads(const Claim& c, CachedPlan& plan, int limit,
                       const std::function<bool(uint64 row, StreamCursor& position)>& row);

// A statement over the work state, prepared once per source (CachedPlan: and per layout).
class WorkPlan {
public:
    WorkPlan(const std::string& inbox_sql, std::initializer_list<Oid> arg_types, bool replanned = false)
        : WorkPlan(inbox_sql, std::vector<Oid>(arg_types), replanned) {}
    WorkPlan(const std::string& inbox_sql, const std::vector<Oid>& arg_types, bool replanned = false)
        : plans_{make(inbox_sql, arg_types, replanned), make(outbox_twin(inbox_sql), arg_types, replanned)} {}
    static WorkPlan replanned(const std::string& inbox_sql, std::initializer_list<Oid> arg_types) {
        return WorkPlan(inbox_sql, arg_types, true);
    }
    // With the split layout's own text (CachedPlan::split_as), twinned for the outbox too.
    WorkPlan& split_as(const std::string& split_inbox_sql) { return split_as(split_inbox_sql, outbox_twin(split_inbox_sql)); }
    WorkPlan& split_as(const std::string& split_inbox_sql, const std::string& split_outbox_sql) {
        plans_[0].split_as(split_inbox_sql);
        plans_[1].split_as(split_outbox_sql);
        return *this;
    }
    CachedPlan& operator[](Source source) { return plans_[static_cast<int>(source)]; }

private:
    static CachedPlan make(const std::string& sql, const std::vector<Oid>& types, bool replanned) {
        return replanned ? CachedPlan::replanned(sql, types) : CachedPlan(sql, types);
    }
    CachedPlan plans_[2];
};

// The arguments of one claim_work call, for one source.
struct Claim {
    Source source = Source::inbox;
    core::Uuid instance{};
    TimestampTz now = 0, expiry = 0;
    int max_rows = 0, partition_count = 0, max_per_stream = 0;
    Datum consumer = 0, partitions = 0;  // valid when the matching *_null flag is ' '
    char consumer_null = 'n', partitions_null = 'n';
};

// What a claim_work call with leases in shared memory hands out, kept until every lease of the
// call has been taken: its token is drawn only then (claim_store_shared.cpp says why).
struct SharedHandOut {
    std::vector<HeapTuple> rows;         // result rows (SPI's, kept until SPI_finish)
    std::vector<TupleDesc> descs;        // and their descriptors
    std::vector<char> provisional;       // the row's lease carries the call's provisional token
    std::vector<shm::LeaseKey> keys;
    TupleDesc result_desc = nullptr;     // claim_work's result rows
};

// Claims up to c.max_rows rows of c.source with leases in shared memory; returns how many. A row
// whose next delivery would exceed its consumer's max_attempts (`policies`) is dead-lettered.
class RetryPolicies;
int claim_shared(const Claim& c, const RetryPolicies& policies, SharedHandOut& out);

// The same with leases in the work rows: one fresh token per claim_work call, drawn once into
// `fresh_token`; the rows go straight to the result.
int claim_rows(const Claim& c, const RetryPolicies& policies, int64_t& fresh_token, ReturnSetInfo* rsinfo);

// Draws the call's token, gives it to the call's leases and appends the rows to the result.
void finish_shared_claim(SharedHandOut& out, ReturnSetInfo* rsinfo);

// The rows of a stream after `seq` that carry `token`: the rest of one holder's run
// (work_runs.cpp explains the invariant this keeps).
struct RunAfter {
    std::string consumer;
    core::Uuid stream{};
    int64_t seq = 0;
    int64_t token = 0;
};

// Voids each run's leases (refunding the delivery when `refund`), whole or not at all, without
// waiting for a row lock; returns the indexes of the runs left as they were because a row of
// theirs is locked by someone else right now.
std::vector<std::size_t> end_runs(Source source, const std::vector<RunAfter>& runs, bool refund);

// Writes delivery counts to work rows (never lowering one): where a count kept in shared memory
// must last (fail, dead letter, a lapsed lease taken over).
void write_attempts(Source source, const std::vector<core::Uuid>& ids, const std::vector<std::string>& consumers,
                    const std::vector<int>& attempts);

// The unfinished rows of a stream after `seq`, in any order.
std::vector<core::Uuid> stream_rest(Source source, const std::string& consumer, const core::Uuid& stream, int64_t seq);

// When rows of `source` (of `consumer`, inbox only; nullopt: any) next become claimable by
// themselves after `now`: a scheduled row or stream head, a lease lapsing. INT64_MAX: none.
TimestampTz next_due_of(Source source, const std::optional<std::string>& consumer, TimestampTz now);

// How many times dead_letter() moved rows in this backend: a claim that did has written.
extern uint64_t dead_letter_calls;

// Moves work to wh_dead_letters with its message; a NULL error keeps the last one. The
// outbox's work rows all have consumer ''.
void dead_letter(Source source, const std::vector<core::Uuid>& ids, const std::vector<std::string>& consumers,
                 const std::vector<std::optional<std::string>>& errors, TimestampTz now);

}  // namespace whizbang::pg
