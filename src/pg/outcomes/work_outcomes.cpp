// complete_work, fail_work, renew_leases, release_work, cancel_work: one outcome per named
// message.
//
// Each call locks the rows it names, sorted by message id (so overlapping calls wait for each
// other at most), then decides per input element, in input order: not_found, lease_lost (the
// token is no longer the row's current one: nothing changes), or the operation. An id named
// twice in one call is acted on once; a later mention of an id the call completed, failed or
// released finds nothing.
#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "core/backoff.h"
#include "pg/citus/work_route.h"
#include "pg/boundary/args.h"
#include "pg/citus/citus_route.h"
#include "pg/boundary/arrays.h"
#include "pg/store/dedup.h"
#include "pg/lease/lease_store.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/claim/work.h"
#include "pg/wait/work_wait.h"
#include "pg/boundary/required_privileges.h"

namespace whizbang::pg {
namespace {

WorkPlan lock_named_plan(
    "SELECT w.message_id, w.lease_token, w.attempts, w.stream_id, w.stream_seq, w.lease_expiry"
    "  FROM whizbang.wh_inbox w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($2) AND w.consumer OPERATOR(pg_catalog.=) $1"
    "   AND w.processed_at IS NULL"
    " ORDER BY w.message_id FOR UPDATE OF w",
    {TEXTOID, UUIDARRAYOID});

// Completed work leaves: one row, message and work state alike (in the split layout the work
// row, then its message).
const char* const kDeleteSplitDone =
    "WITH w AS (DELETE FROM whizbang.wh_inbox w"
    "            WHERE w.consumer OPERATOR(pg_catalog.=) $1 AND w.message_id OPERATOR(pg_catalog.=) ANY ($2)"
    "              AND w.processed_at IS NULL"
    "           RETURNING w.message_id)"
    "DELETE FROM whizbang.wh_inbox/*message*/ i USING w"
    " WHERE i.message_id OPERATOR(pg_catalog.=) w.message_id";
WorkPlan delete_done_plan = WorkPlan(
    "DELETE FROM whizbang.wh_inbox w"
    " WHERE w.consumer OPERATOR(pg_catalog.=) $1 AND w.message_id OPERATOR(pg_catalog.=) ANY ($2)"
    "   AND w.processed_at IS NULL",
    {TEXTOID, UUIDARRAYOID}).split_as(split_twin(std::string(kDeleteSplitDone) + " AND i.consumer OPERATOR(pg_catalog.=) $1"),
                                      split_twin(outbox_twin(kDeleteSplitDone)));

// Debug mode keeps completed rows, with the delivery count of the completed delivery ($4, one
// per id): the table store's claim wrote it into the row already, the shared-memory store's
// claim wrote nothing (it is in the lease), so both stores leave the same row. (GREATEST is
// syntax, not a function: no search_path is involved.)
WorkPlan mark_done_plan(
    "UPDATE whizbang.wh_inbox w SET processed_at = $3, lease_instance = NULL, lease_token = NULL,"
    "  lease_expiry = NULL, attempts = GREATEST(w.attempts, u.attempts)"
    "  FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($4)) AS u(id, attempts)"
    " WHERE w.consumer OPERATOR(pg_catalog.=) $1 AND w.message_id OPERATOR(pg_catalog.=) u.id"
    "   AND w.processed_at IS NULL",
    {TEXTOID, UUIDARRAYOID, TIMESTAMPTZOID, INT4ARRAYOID});

WorkPlan retry_plan(
    "UPDATE whizbang.wh_inbox w"
    "   SET scheduled_for = u.due, last_error = COALESCE(u.error, w.last_error), lease_instance = NULL,"
    "       lease_token = NULL,"
    "       lease_expiry = NULL"
    "  FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4)) AS u(id, due, error)"
    " WHERE w.consumer OPERATOR(pg_catalog.=) $1 AND w.message_id OPERATOR(pg_catalog.=) u.id",
    {TEXTOID, UUIDARRAYOID, TIMESTAMPTZARRAYOID, TEXTARRAYOID});

WorkPlan renew_plan(
    "UPDATE whizbang.wh_inbox SET lease_expiry = $3"
    " WHERE consumer OPERATOR(pg_catalog.=) $1 AND message_id OPERATOR(pg_catalog.=) ANY ($2)",
    {TEXTOID, UUIDARRAYOID, TIMESTAMPTZOID});

WorkPlan release_plan(
    "UPDATE whizbang.wh_inbox"
    "   SET lease_instance = NULL, lease_token = NULL, lease_expiry = NULL,"
    "       attempts = pg_catalog.int4larger(attempts OPERATOR(pg_catalog.-) 1, 0)"
    " WHERE consumer OPERATOR(pg_catalog.=) $1 AND message_id OPERATOR(pg_catalog.=) ANY ($2)",
    {TEXTOID, UUIDARRAYOID});

struct Row {
    std::optional<int64_t> token;
    int attempts = 0;
    std::optional<core::Uuid> stream;
    int64_t seq = 0;
    std::optional<TimestampTz> lease_expiry;
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

// `tokens_arg` < 0: the function takes no tokens (cancel_work).
void read_named(FunctionCallInfo fcinfo, Named& n, int tokens_arg, bool tokens_required, int consumer_arg_no,
                int now_arg) {
    n.source = *source_arg(fcinfo, 0, false);
    n.ids = uuid_array_arg(fcinfo, 1, "p_message_ids", false).value_or(std::vector<core::Uuid>{});
    if (tokens_required) require_not_null(fcinfo, tokens_arg, "p_lease_tokens");
    n.lease_required = tokens_required;
    if (tokens_arg >= 0) n.tokens = int8_array_arg(fcinfo, tokens_arg, "p_lease_tokens");
    if (n.tokens) require_same_length(n.ids.size(), "p_message_ids", n.tokens->size(), "p_lease_tokens");
    // DESIGN §3.4: p_consumer is ignored for the outbox.
    if (n.source == Source::inbox) n.consumer = consumer_arg(fcinfo, consumer_arg_no);
    n.now = timestamptz_arg(fcinfo, now_arg, "p_now");
}

void lock_named(Named& n) {
    n.consumer_datum = text_datum(n.consumer);
    if (n.ids.empty()) return;
    uint64 rows = lock_named_plan[n.source].execute({n.consumer_datum, uuid_array(n.ids)});
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false, token_null = false;
        core::Uuid id = uuid_from_datum(spi_value(r, 1, &isnull));
        Datum token = spi_value(r, 2, &token_null);
        Row row;
        if (!token_null) row.token = DatumGetInt64(token);
        row.attempts = DatumGetInt32(spi_value(r, 3, &isnull));
        bool no_stream = false;
        Datum stream = spi_value(r, 4, &no_stream);
        if (!no_stream) {
            row.stream = uuid_from_datum(stream);
            row.seq = DatumGetInt64(spi_value(r, 5, &isnull));
        }
        bool no_expiry = false;
        Datum expiry = spi_value(r, 6, &no_expiry);
        if (!no_expiry) row.lease_expiry = DatumGetTimestampTz(expiry);
        if (shared_leases_active()) {
            // The row's lease lives in shared memory; one this transaction is already ending
            // is no lease any more.
            const std::optional<shm::Lease> lease = shm::get({n.source, id, n.consumer});
            if (lease && !lease->ending) {
                row.token = lease->token;
                row.lease_expiry = lease->expiry;
                row.attempts = lease->attempts;
            }
        }
        n.rows[id] = row;
    }
}

// The named rows whose existence decides between not_found and lease_lost when they hold no
// lease of the caller's.
WorkPlan unfinished_plan(
    "SELECT w.message_id FROM whizbang.wh_inbox w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($2) AND w.consumer OPERATOR(pg_catalog.=) $1"
    "   AND w.processed_at IS NULL",
    {TEXTOID, UUIDARRAYOID});

// Shared-memory store, calls with tokens: the rows a caller holds are known from their leases,
// so no row is locked first. A row is written only by the holder of its lease (claims write
// only rows whose lease they took over), so fenced calls never wait for each other; the rows
// they delete or update are locked by those statements.
void read_held(Named& n) {
    // As the table store's row locks would, refuse where the change could not be written.
    pg_call([] {
        PreventCommandIfReadOnly("a lease change");
        PreventCommandDuringRecovery("a lease change");
    });
    n.consumer_datum = text_datum(n.consumer);
    std::vector<core::Uuid> unleased;
    for (const core::Uuid& id : n.ids) {
        if (n.rows.count(id)) continue;
        const std::optional<shm::Lease> lease = shm::get({n.source, id, n.consumer});
        if (!lease || lease->ending) {
            unleased.push_back(id);
            continue;
        }
        Row row;
        row.token = lease->token;
        row.attempts = lease->attempts;
        if (lease->has_stream) row.stream = lease->stream;
        row.seq = lease->seq;
        row.lease_expiry = lease->expiry;
        n.rows[id] = row;
    }
    if (unleased.empty()) return;
    uint64 rows = unfinished_plan[n.source].execute({n.consumer_datum, uuid_array(unleased)});
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        n.rows[uuid_from_datum(spi_value(r, 1, &isnull))] = Row{};  // no lease: lease_lost
    }
}

// The rows a fenced call acts on: from their leases (shared memory) or locked in id order.
void find_named(Named& n) {
    if (shared_leases_active() && n.tokens) read_held(n);
    else lock_named(n);
}

// Shared-memory store: marks element i's lease ending (gone when this transaction commits,
// held again if it aborts). False when a claim took it over since lock_named read it.
bool end_shared_lease(const Named& n, std::size_t i) {
    if (!shared_leases_active()) return true;
    bool mismatch = false;
    std::optional<int64_t> token;
    if (n.tokens) {
        token = (*n.tokens)[i];
    } else {
        // Unfenced (and cancel_work): the lease the row had when it was locked, or none; a claim
        // that took the row over since then keeps it.
        auto it = n.rows.find(n.ids[i]);
        token = it != n.rows.end() && it->second.token ? *it->second.token : shm::kNoLease;
    }
    (void)shm::end({n.source, n.ids[i], n.consumer}, token, &mismatch);
    return !mismatch;
}

// not_found / lease_lost for element i, or nullptr when the operation may proceed.
const char* refusal(const Named& n, std::size_t i) {
    auto it = n.rows.find(n.ids[i]);
    if (it == n.rows.end()) return "not_found";
    // Only a NULL array skips fencing (DESIGN §3.4); a NULL element is a token that is nobody's
    // current one. Renewal and release also need a current lease to act on.
    if (!n.tokens) return n.lease_required ? "lease_lost" : nullptr;
    const std::optional<int64_t> given = (*n.tokens)[i];
    if (!given || !it->second.token || *given != *it->second.token) return "lease_lost";
    return nullptr;
}

// The rest of the caller's run in the row's stream, when the row was leased as part of one: the
// rows behind a row that goes back to the queue wait for it (work_runs.cpp).
void add_run_after(const Named& n, const Row& row, std::vector<RunAfter>& runs) {
    if (row.stream && row.token) runs.push_back({n.consumer, *row.stream, row.seq, *row.token});
}

struct Outcome {
    const char* word;
    std::optional<TimestampTz> scheduled_for;
};

// One row per element; the result's row type decides whether scheduled_for is a column.
void emit(FunctionCallInfo fcinfo, const Named& n, const std::vector<Outcome>& outcomes) {
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    std::vector<Datum> words(outcomes.size());
    for (std::size_t i = 0; i < outcomes.size(); ++i) words[i] = text_datum(outcomes[i].word);
    pg_call([&] {
        for (std::size_t i = 0; i < outcomes.size(); ++i) {
            Datum values[3] = {PointerGetDatum(n.ids[i].data()), words[i],
                               outcomes[i].scheduled_for ? TimestampTzGetDatum(*outcomes[i].scheduled_for) : (Datum)0};
            bool nulls[3] = {false, false, !outcomes[i].scheduled_for};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
    });
}

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

// Inbox messages with unfinished work under another consumer, of the ids named.
CachedPlan other_consumers_plan(
    "SELECT w.message_id, w.consumer::pg_catalog.text FROM whizbang.wh_inbox w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($2) AND w.consumer OPERATOR(pg_catalog.<>) $1"
    "   AND w.processed_at IS NULL"
    " ORDER BY w.message_id, w.consumer",
    {TEXTOID, UUIDARRAYOID});

// not_found stays the outcome (the outcome words are DESIGN's), but an inbox id that has work
// under another consumer than p_consumer is almost always a call with the wrong p_consumer (or
// none): a NOTICE says so, per such id, with the consumer to pass. Asked only when an outcome
// is not_found; needs an open SPI connection.
void explain_not_found(const char* function, const Named& n, const std::vector<Outcome>& outcomes) {
    if (n.source != Source::inbox) return;
    std::vector<core::Uuid> missing;
    for (std::size_t i = 0; i < outcomes.size(); ++i)
        if (strcmp(outcomes[i].word, "not_found") == 0) missing.push_back(n.ids[i]);
    if (missing.empty()) return;
    std::sort(missing.begin(), missing.end());
    missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
    const uint64 rows = other_consumers_plan.execute({n.consumer_datum, uuid_array(missing)});
    std::map<core::Uuid, std::string> others;
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        const core::Uuid id = uuid_from_datum(spi_value(r, 1, &isnull));
        std::string& list = others[id];
        list += (list.empty() ? "'" : ", '") + text_from_datum(spi_value(r, 2, &isnull)) + "'";
    }
    for (const auto& [id, consumers] : others) {
        const std::string message = std::string("whizbang.") + function + ": message " + core::to_string(id) +
                                    " is not_found for consumer '" + n.consumer + "': it has work for consumer " +
                                    consumers;
        const std::string hint = "Pass the consumer the message was stored for: p_consumer => " +
                                 consumers.substr(0, consumers.find(',')) + ".";
        pg_call([&] {
            ereport(NOTICE, (errmsg_internal("%s", message.c_str()),
                             errdetail("not_found means that the message has no unfinished work for p_consumer "
                                       "(the default consumer is '')."),
                             errhint("%s", hint.c_str())));
        });
    }
}

// What the call's source needs of the caller (required_privileges.h), checked before it routes
// or runs a statement.
void require_source_privileges(const char* function, Source source) {
    CallShape shape;
    shape.inbox = source == Source::inbox;
    shape.outbox = source == Source::outbox;
    require_privileges(function, shape);
}

std::mt19937_64& jitter_source() {
    static std::mt19937_64 engine{std::random_device{}()};
    return engine;
}

}  // namespace
}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// complete_work(p_source, p_message_ids, p_lease_tokens, p_consumer, p_now)
WB_ROUTED_FUNCTION(wb_complete_work, by_claimed_id) {
    Named n;
    read_named(fcinfo, n, 2, false, 3, 4);
    if (!n.ids.empty()) require_source_privileges("complete_work", n.source);
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (must_route()) {
        route_outcomes(fcinfo, "complete_work", n.source, n.ids, n.consumer);
        return (Datum)0;
    }
    SpiConnection spi;
    find_named(n);
    std::vector<core::Uuid> done;
    std::vector<int> done_attempts;
    auto outcomes = decide_all(n, true, [&](std::size_t i, Row& row) {
        done.push_back(n.ids[i]);
        done_attempts.push_back(row.attempts);
        return Outcome{"completed", std::nullopt};
    });
    if (!done.empty()) {
        if (setting_bool("debug_mode"))
            mark_done_plan[n.source].execute(
                {n.consumer_datum, uuid_array(done), TimestampTzGetDatum(n.now), int4_array(done_attempts)});
        else
            delete_done_plan[n.source].execute({n.consumer_datum, uuid_array(done)});
    }
    explain_not_found("complete_work", n, outcomes);
    spi.finish();
    emit(fcinfo, n, outcomes);
    return (Datum)0;
}

// fail_work(p_source, p_message_ids, p_errors, p_lease_tokens, p_retryable, p_consumer, p_now)
WB_ROUTED_FUNCTION(wb_fail_work, by_claimed_id) {
    Named n;
    read_named(fcinfo, n, 3, false, 5, 6);
    if (!n.ids.empty()) require_source_privileges("fail_work", n.source);
    auto errors = nullable_text_array_arg(fcinfo, 2, "p_errors");
    if (errors) require_same_length(n.ids.size(), "p_message_ids", errors->size(), "p_errors");
    auto retryable = bool_array_arg(fcinfo, 4, "p_retryable");
    if (retryable) require_same_length(n.ids.size(), "p_message_ids", retryable->size(), "p_retryable");
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (must_route()) {
        route_outcomes(fcinfo, "fail_work", n.source, n.ids, n.consumer);
        return (Datum)0;
    }

    SpiConnection spi;
    find_named(n);
    const int64_t max_attempts = setting_int("max_attempts");
    const int64_t base = setting_int("retry_base_seconds"), cap = setting_int("retry_max_seconds");
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<core::Uuid> retry_ids, dead_ids;
    std::vector<TimestampTz> retry_at;
    std::vector<std::optional<std::string>> retry_errors;
    std::vector<std::string> dead_consumers;
    std::vector<std::optional<std::string>> dead_errors;
    std::vector<RunAfter> runs;
    std::map<core::Uuid, int> delivered;  // the count each failed row keeps
    auto outcomes = decide_all(n, true, [&](std::size_t i, Row& row) {
        delivered[n.ids[i]] = row.attempts;
        std::optional<std::string> error = errors ? (*errors)[i] : std::nullopt;
        const bool may_retry = !retryable || (*retryable)[i].value_or(true);
        if (!may_retry || row.attempts >= max_attempts) {
            dead_ids.push_back(n.ids[i]);
            dead_consumers.push_back(n.consumer);
            dead_errors.push_back(error);
            return Outcome{"dead_lettered", std::nullopt};
        }
        TimestampTz at = add_to_timestamp(n.now, core::retry_delay_us(row.attempts, base, cap, unit(jitter_source())),
                                          "the retry time");
        retry_ids.push_back(n.ids[i]);
        retry_at.push_back(at);
        note_work(n.source, n.consumer, row.stream.value_or(n.ids[i]), at, n.now);
        retry_errors.push_back(error);
        add_run_after(n, row, runs);
        return Outcome{"retry_scheduled", at};
    });
    if (shared_leases_active()) {
        // The delivery being failed was counted in shared memory only: it lasts from now on.
        std::vector<core::Uuid> ids = retry_ids;
        ids.insert(ids.end(), dead_ids.begin(), dead_ids.end());
        std::vector<int> attempts;
        for (const core::Uuid& id : ids) attempts.push_back(delivered.at(id));
        write_attempts(n.source, ids, std::vector<std::string>(ids.size(), n.consumer), attempts);
    }
    if (!retry_ids.empty())
        retry_plan[n.source].execute({n.consumer_datum, uuid_array(retry_ids), timestamptz_array(retry_at),
                            nullable_text_array(retry_errors)});
    dead_letter(n.source, dead_ids, dead_consumers, dead_errors, n.now);
    end_runs(n.source, runs, true);
    explain_not_found("fail_work", n, outcomes);
    spi.finish();
    emit(fcinfo, n, outcomes);
    return (Datum)0;
}

// renew_leases(p_source, p_message_ids, p_lease_tokens, p_lease_seconds, p_consumer, p_now)
WB_ROUTED_FUNCTION(wb_renew_leases, by_claimed_id) {
    Named n;
    read_named(fcinfo, n, 2, true, 4, 5);
    if (!n.ids.empty()) require_source_privileges("renew_leases", n.source);
    require_not_null(fcinfo, 3, "p_lease_seconds");
    int seconds = PG_GETARG_INT32(3);
    if (seconds < 1) throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "p_lease_seconds must be at least 1");
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (must_route()) {
        route_outcomes(fcinfo, "renew_leases", n.source, n.ids, n.consumer);
        return (Datum)0;
    }
    SpiConnection spi;
    find_named(n);
    std::vector<core::Uuid> renew;
    const TimestampTz expiry = add_to_timestamp(n.now, static_cast<int64_t>(seconds) * USECS_PER_SEC, "the lease expiry");
    const bool shared = shared_leases_active();
    auto outcomes = decide_all(n, false, [&](std::size_t i, Row& row) {
        // Shared memory: renewed there at once, unless a claim took the lease over meanwhile.
        if (shared) return Outcome{shm::renew({n.source, n.ids[i], n.consumer}, *row.token, expiry) ? "renewed" : "lease_lost",
                                   std::nullopt};
        renew.push_back(n.ids[i]);
        return Outcome{"renewed", std::nullopt};
    });
    if (!renew.empty())
        renew_plan[n.source].execute({n.consumer_datum, uuid_array(renew), TimestampTzGetDatum(expiry)});
    explain_not_found("renew_leases", n, outcomes);
    spi.finish();
    emit(fcinfo, n, outcomes);
    return (Datum)0;
}

// release_work(p_source, p_message_ids, p_lease_tokens, p_consumer, p_now)
WB_ROUTED_FUNCTION(wb_release_work, by_claimed_id) {
    Named n;
    read_named(fcinfo, n, 2, true, 3, 4);
    if (!n.ids.empty()) require_source_privileges("release_work", n.source);
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (must_route()) {
        route_outcomes(fcinfo, "release_work", n.source, n.ids, n.consumer);
        return (Datum)0;
    }
    SpiConnection spi;
    find_named(n);
    std::vector<core::Uuid> release;
    std::vector<RunAfter> runs;
    auto outcomes = decide_all(n, true, [&](std::size_t i, Row& row) {
        release.push_back(n.ids[i]);
        add_run_after(n, row, runs);
        note_work(n.source, n.consumer, row.stream.value_or(n.ids[i]), n.now, n.now);
        return Outcome{"released", std::nullopt};
    });
    // Shared memory: nothing to write, the delivery was never counted in the row (a refund).
    if (!release.empty() && !shared_leases_active()) release_plan[n.source].execute({n.consumer_datum, uuid_array(release)});
    end_runs(n.source, runs, true);
    explain_not_found("release_work", n, outcomes);
    spi.finish();
    emit(fcinfo, n, outcomes);
    return (Datum)0;
}

// cancel_work(p_source, p_message_ids, p_consumer, p_now): pending messages leave without
// being handled, with their work row; the dedup record stays, so a redelivery is still a
// duplicate. A row under a live lease is someone's work in progress: it answers `leased` and
// stays (its holder completes or fails it; cancel it after the lease ends). A lapsed lease is
// no lease, as for claims. Cancelling a stream's head makes the next row the head.
WB_ROUTED_FUNCTION(wb_cancel_work, by_claimed_id) {
    Named n;
    read_named(fcinfo, n, -1, false, 2, 3);
    if (!n.ids.empty()) require_source_privileges("cancel_work", n.source);
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (must_route()) {
        route_outcomes(fcinfo, "cancel_work", n.source, n.ids, n.consumer);
        return (Datum)0;
    }
    SpiConnection spi;
    lock_named(n);
    std::vector<core::Uuid> cancelled;
    // Not consuming: a leased id named twice is leased twice; a cancelled one is erased here, so
    // a later mention of it finds nothing (`row` is not used after the erase).
    auto outcomes = decide_all(n, false, [&](std::size_t i, Row& row) {
        if (row.lease_expiry && *row.lease_expiry > n.now) return Outcome{"leased", std::nullopt};
        if (!end_shared_lease(n, i)) return Outcome{"leased", std::nullopt};  // just claimed again
        cancelled.push_back(n.ids[i]);
        n.rows.erase(n.ids[i]);
        return Outcome{"cancelled", std::nullopt};
    });
    // Deleted also in debug_mode: a cancelled message was not completed.
    if (!cancelled.empty())
        delete_done_plan[n.source].execute({n.consumer_datum, uuid_array(cancelled)});
    explain_not_found("cancel_work", n, outcomes);
    spi.finish();
    emit(fcinfo, n, outcomes);
    return (Datum)0;
}

namespace whizbang::pg {
namespace {

// The named outbox rows, locked in message id order before the statement changes any: an
// uncorrelated ARRAY sub-select is an init plan, run to its end before the outer scan returns
// its first row. The outer scan alone would lock them in the order it meets them, which is the
// physical order when the planner picks a sequential or bitmap scan (a small or a large outbox)
// and deadlocks with complete_work's id-ordered lock pass
// (test/isolation/specs/outbox_complete_published_no_deadlock.spec).
const std::string outbox_ids_locked =
    "ARRAY(SELECT l.message_id FROM whizbang.wh_outbox l"
    "       WHERE l.consumer OPERATOR(pg_catalog.=) '' AND l.message_id OPERATOR(pg_catalog.=) ANY ($1)"
    "         AND l.processed_at IS NULL"
    "       ORDER BY l.message_id FOR UPDATE OF l)";

CachedPlan delete_published_plan = CachedPlan(
    "DELETE FROM whizbang.wh_outbox w"
    " WHERE w.consumer OPERATOR(pg_catalog.=) '' AND w.processed_at IS NULL"
    "   AND w.message_id OPERATOR(pg_catalog.=) ANY (" + outbox_ids_locked + ")"
    " RETURNING w.message_id",
    {UUIDARRAYOID}).split_as(split_twin(
    "WITH w AS (DELETE FROM whizbang.wh_outbox w"
    "            WHERE w.consumer OPERATOR(pg_catalog.=) '' AND w.processed_at IS NULL"
    "              AND w.message_id OPERATOR(pg_catalog.=) ANY (" + outbox_ids_locked + ")"
    "           RETURNING w.message_id)"
    "DELETE FROM whizbang.wh_outbox/*message*/ o USING w WHERE o.message_id OPERATOR(pg_catalog.=) w.message_id"
    " RETURNING o.message_id"));

CachedPlan mark_published_plan(
    "UPDATE whizbang.wh_outbox w SET processed_at = $2, lease_instance = NULL, lease_token = NULL,"
    "  lease_expiry = NULL"
    " WHERE w.consumer OPERATOR(pg_catalog.=) '' AND w.processed_at IS NULL"
    "   AND w.message_id OPERATOR(pg_catalog.=) ANY (" + outbox_ids_locked + ")"
    " RETURNING w.message_id",
    {UUIDARRAYOID, TIMESTAMPTZOID});

}  // namespace
}  // namespace whizbang::pg

// complete_outbox_published(p_ids uuid[], p_debug_mode boolean) RETURNS int — the seed's
// contract: the published rows leave the outbox (debug mode, or the debug_mode setting: they
// are marked processed and kept), and the count of rows that did is returned. No lease check:
// ids that are unknown, NULL, repeated or already completed are no-ops. One statement, which
// locks the rows in id order first, as every other call that changes work rows does.
WB_ROUTED_FUNCTION(wb_complete_outbox_published, by_claimed_id) {
    std::vector<core::Uuid> ids = uuid_array_arg(fcinfo, 0, "p_ids", false, true).value_or(std::vector<core::Uuid>{});
    const bool debug_arg = !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    if (ids.empty()) PG_RETURN_INT32(0);
    require_privileges("complete_outbox_published");
    if (must_route()) PG_RETURN_INT32(route_published(fcinfo, ids));
    SpiConnection spi;
    // Shared-memory store: the published rows' leases end with this transaction, after the rows
    // are written (their in-progress xmax keeps claims off them meanwhile, so unknown ids and
    // rows nobody holds take no place in the lease table): the delete trigger ends a deleted
    // row's; in debug mode the rows stay, processed, and are ended here.
    const bool debug = debug_arg || setting_bool("debug_mode");
    uint64 done = debug ? mark_published_plan.execute(
                              {uuid_array(ids), TimestampTzGetDatum(GetCurrentTransactionStartTimestamp())})
                        : delete_published_plan.execute({uuid_array(ids)});
    if (debug && shared_leases_active()) {
        std::vector<core::Uuid> marked;
        for (uint64 r = 0; r < done; ++r) {
            bool isnull = false;
            marked.push_back(uuid_from_datum(spi_value(r, 1, &isnull)));
        }
        for (const core::Uuid& id : marked) {
            bool mismatch = false;
            (void)shm::end({Source::outbox, id, ""}, std::nullopt, &mismatch, true);
        }
    }
    spi.finish();
    PG_RETURN_INT32(static_cast<int32>(done));
}
