// What the calls that name work rows by message id share (complete_work, fail_work,
// renew_leases, release_work, cancel_work, requeue, reschedule): their common arguments, the
// named rows found (locked in id order, or read from their shared-memory leases), the
// not_found / lease_lost decision per element and the result rows.
//
// Each call locks the rows it names, sorted by message id (so overlapping calls wait for each
// other at most), then decides per input element, in input order: not_found, lease_lost (the
// token is no longer the row's current one: nothing changes), or the operation.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/uuid.h"
#include "pg/boundary/bridge.h"
#include "pg/claim/work.h"

namespace whizbang::pg {

struct Row {
    std::optional<int64_t> token;
    int attempts = 0;
    std::optional<core::Uuid> stream;
    int64_t seq = 0;
    std::optional<TimestampTz> lease_expiry;
    TimestampTz due = 0;  // scheduled_for (read by lock_named only)
};

// The arguments every one of these functions takes, and the rows they name, locked.
struct Named {
    Source source = Source::inbox;
    std::string consumer;  // '' for the outbox
    Datum consumer_datum = 0;
    std::vector<core::Uuid> ids;
    std::optional<std::vector<std::optional<int64_t>>> tokens;  // nullopt: no fencing check
    bool lease_required = false;  // renew / release act on a current lease only
    TimestampTz now = 0;
    std::map<core::Uuid, Row> rows;
};

struct Outcome {
    const char* word;
    std::optional<TimestampTz> scheduled_for;
};

// Reads p_source (argument 0), p_message_ids (1), the tokens (`tokens_arg`, < 0: the function
// takes none), p_consumer and p_now.
void read_named(FunctionCallInfo fcinfo, Named& n, int tokens_arg, bool tokens_required, int consumer_arg_no,
                int now_arg);

// The named unfinished rows, locked in message id order, with their leases.
void lock_named(Named& n);

// The rows a fenced call acts on: from their leases (shared memory) or locked in id order.
void find_named(Named& n);

// Shared-memory store: marks element i's lease ending (gone when this transaction commits,
// held again if it aborts). False when a claim took it over since lock_named read it.
bool end_shared_lease(const Named& n, std::size_t i);

// not_found / lease_lost for element i, or nullptr when the operation may proceed.
const char* refusal(const Named& n, std::size_t i);

// The rest of the caller's run in the row's stream, when the row was leased as part of one: the
// rows behind a row that goes back to the queue wait for it (work_runs.cpp).
void add_run_after(const Named& n, const Row& row, std::vector<RunAfter>& runs);

// One row per element; the result's row type decides whether scheduled_for is a column.
void emit(FunctionCallInfo fcinfo, const Named& n, const std::vector<Outcome>& outcomes);

// A NOTICE per not_found inbox id that has work under another consumer (needs an open SPI
// connection).
void explain_not_found(const char* function, const Named& n, const std::vector<Outcome>& outcomes);

// What the call's source needs of the caller (required_privileges.h), checked before it routes
// or runs a statement.
void require_source_privileges(const char* function, Source source);

// Runs `decide` for every element whose row is present and current; it returns the outcome.
// `consumes`: the operation ends the lease (complete, fail, release).
template <typename F>
std::vector<Outcome> decide_all(Named& n, bool consumes, F decide) {
    std::vector<Outcome> out(n.ids.size());
    for (std::size_t i = 0; i < n.ids.size(); ++i) {
        if (const char* no = refusal(n, i)) {
            out[i] = {no, std::nullopt};
            continue;
        }
        if (consumes && !end_shared_lease(n, i)) {
            out[i] = {"lease_lost", std::nullopt};
            continue;
        }
        out[i] = decide(i, n.rows[n.ids[i]]);
        if (consumes) n.rows.erase(n.ids[i]);
    }
    return out;
}

}  // namespace whizbang::pg
