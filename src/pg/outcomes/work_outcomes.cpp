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
#include "pg/claim/retry_policies.h"
#include "pg/claim/work.h"
#include "pg/ops/counters.h"
#include "pg/wait/work_wait.h"
#include "pg/boundary/required_privileges.h"
#include "pg/outcomes/named_work.h"

namespace whizbang::pg {
namespace {

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
    count(n.source, n.consumer, core::Counter::completed, done.size());
    explain_not_found("complete_work", n, outcomes);
    spi.finish();
    emit(fcinfo, n, outcomes);
    return (Datum)0;
}

// fail_work(p_source, p_message_ids, p_errors, p_lease_tokens, p_retryable, p_consumer, p_now,
// p_retry_after): p_retry_after (0.16.0), when given, is the handler's own delay before the next
// attempt (an HTTP 429's Retry-After) in place of the backoff, for every retryable element.
WB_ROUTED_FUNCTION(wb_fail_work, by_claimed_id) {
    Named n;
    read_named(fcinfo, n, 3, false, 5, 6);
    if (!n.ids.empty()) require_source_privileges("fail_work", n.source);
    auto errors = nullable_text_array_arg(fcinfo, 2, "p_errors");
    if (errors) require_same_length(n.ids.size(), "p_message_ids", errors->size(), "p_errors");
    auto retryable = bool_array_arg(fcinfo, 4, "p_retryable");
    if (retryable) require_same_length(n.ids.size(), "p_message_ids", retryable->size(), "p_retryable");
    // The 0.15.0 SQL definition has seven arguments (a database not updated yet).
    std::optional<int64_t> retry_after;
    if (PG_NARGS() > 7) retry_after = interval_arg(fcinfo, 7, "p_retry_after");
    if (retry_after && *retry_after < 0)
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "p_retry_after must not be negative",
                       "It is the time from p_now to the next attempt.");
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (must_route()) {
        route_outcomes(fcinfo, "fail_work", n.source, n.ids, n.consumer);
        return (Datum)0;
    }

    SpiConnection spi;
    find_named(n);
    const RetryPolicies policies(n.source);
    const RetryPolicy& policy = policies.of(n.consumer);
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
        if (!may_retry || row.attempts >= policy.max_attempts) {
            dead_ids.push_back(n.ids[i]);
            dead_consumers.push_back(n.consumer);
            dead_errors.push_back(error);
            return Outcome{"dead_lettered", std::nullopt};
        }
        const int64_t delay =
            retry_after ? *retry_after
                             : core::retry_delay_us(row.attempts, policy.base_seconds, policy.max_seconds,
                                                    unit(jitter_source()), policy.jitter_percent);
        TimestampTz at = add_to_timestamp(n.now, delay, "the retry time");
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
    count(n.source, n.consumer, core::Counter::failed, retry_ids.size() + dead_ids.size());
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
    count(Source::outbox, "", core::Counter::completed, done);
    spi.finish();
    PG_RETURN_INT32(static_cast<int32>(done));
}
