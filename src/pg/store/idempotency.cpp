// Handler idempotency keys (DESIGN §3.5): idempotency_begin, idempotency_complete,
// idempotency_release.
//
// begin never holds a row lock while it decides or waits: a duplicate reads the key, and a
// take-over (an abandoned claim, a forgotten key) is an UPDATE guarded by the token it read,
// so a concurrent owner's complete is never blocked by a waiting duplicate. In-transaction
// mode still serialises: a begin that meets an uncommitted claim waits inside the INSERT for
// that transaction, then reads what it committed.
#include <algorithm>
#include <array>
#include <unordered_map>
#include <climits>
#include <cstring>

#include "core/idempotency.h"
#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/boundary/table_cache.h"


namespace whizbang::pg {
namespace {

constexpr std::size_t kMaxIdentifierBytes = 255;
constexpr int kMaxRaceRetries = 100;

// A scope's own row of wh_idempotency_policies; NULL columns fall back to the settings.
CachedPlan policy_row_plan(
    "SELECT in_progress_ttl, default_result_ttl, min_result_ttl, max_result_ttl, tombstone_ttl"
    "  FROM whizbang.wh_idempotency_policies WHERE scope OPERATOR(pg_catalog.=) $1",
    {TEXTOID});

CachedPlan claim_plan(
    "INSERT INTO whizbang.wh_idempotency_keys AS k"
    " (scope, idempotency_key, state, token, owner, fingerprint, result_ttl, first_claimed_at, claimed_at,"
    "  lease_expires_at)"
    " VALUES ($1, $2, 'in_progress', pg_catalog.nextval('whizbang.wh_idempotency_token_seq'), $3, $4, $5, $6, $6,"
    "  $6 OPERATOR(pg_catalog.+) $7)"
    " ON CONFLICT (scope, idempotency_key) DO NOTHING"
    " RETURNING k.token",
    {TEXTOID, TEXTOID, TEXTOID, BYTEAOID, INTERVALOID, TIMESTAMPTZOID, INTERVALOID});

CachedPlan read_plan(
    "SELECT state, token, fingerprint, lease_expires_at, result_expires_at, tombstone_expires_at, result,"
    " completed_at"
    " FROM whizbang.wh_idempotency_keys"
    " WHERE scope OPERATOR(pg_catalog.=) $1 AND idempotency_key OPERATOR(pg_catalog.=) $2",
    {TEXTOID, TEXTOID});

// Takes over the key it read, guarded by the token AND the state it read: complete keeps the
// token, so a guard on the token alone would let a late but legitimate complete be overwritten
// (test/isolation/specs/idempotency_reclaim_race.spec). An abandoned claim keeps its
// fingerprint; a forgotten (completed) key starts afresh.
CachedPlan reclaim_plan(
    "UPDATE whizbang.wh_idempotency_keys"
    " SET token = $10, owner = $4,"
    "     fingerprint = CASE WHEN state OPERATOR(pg_catalog.=) 'completed' THEN $5"
    "                        ELSE COALESCE(fingerprint, $5) END,"
    "     first_claimed_at = CASE WHEN state OPERATOR(pg_catalog.=) 'completed' THEN $7 ELSE first_claimed_at END,"
    "     state = 'in_progress', result = NULL, result_ttl = $6, claimed_at = $7,"
    "     lease_expires_at = $7 OPERATOR(pg_catalog.+) $8,"
    "     completed_at = NULL, result_expires_at = NULL, tombstone_expires_at = NULL"
    " WHERE scope OPERATOR(pg_catalog.=) $1 AND idempotency_key OPERATOR(pg_catalog.=) $2"
    "   AND token OPERATOR(pg_catalog.=) $3 AND state OPERATOR(pg_catalog.=) $9"
    " RETURNING token",
    {TEXTOID, TEXTOID, INT8OID, TEXTOID, BYTEAOID, INTERVALOID, TIMESTAMPTZOID, INTERVALOID, TEXTOID, INT8OID});

// The take-over's new token, drawn before the UPDATE: Citus refuses a volatile function in an
// UPDATE of a distributed table (docs/scaleout.md); a take-over that loses its race leaves a
// gap in the sequence, which tokens allow (they only grow).
CachedPlan next_token_plan("SELECT pg_catalog.nextval('whizbang.wh_idempotency_token_seq')", {});

CachedPlan complete_plan(
    "UPDATE whizbang.wh_idempotency_keys"
    " SET state = 'completed', result = $4, completed_at = $5,"
    "     result_expires_at = $5 OPERATOR(pg_catalog.+) COALESCE($6, result_ttl),"
    "     tombstone_expires_at = $5 OPERATOR(pg_catalog.+) COALESCE($6, result_ttl)"
    "       OPERATOR(pg_catalog.+) $7"
    " WHERE scope OPERATOR(pg_catalog.=) $1 AND idempotency_key OPERATOR(pg_catalog.=) $2"
    "   AND state OPERATOR(pg_catalog.=) 'in_progress' AND token OPERATOR(pg_catalog.=) $3",
    {TEXTOID, TEXTOID, INT8OID, JSONBOID, TIMESTAMPTZOID, INTERVALOID, INTERVALOID});

CachedPlan release_plan(
    "DELETE FROM whizbang.wh_idempotency_keys"
    " WHERE scope OPERATOR(pg_catalog.=) $1 AND idempotency_key OPERATOR(pg_catalog.=) $2"
    "   AND state OPERATOR(pg_catalog.=) 'in_progress' AND token OPERATOR(pg_catalog.=) $3",
    {TEXTOID, TEXTOID, INT8OID});

CachedPlan exists_plan(
    "SELECT 1 FROM whizbang.wh_idempotency_keys"
    " WHERE scope OPERATOR(pg_catalog.=) $1 AND idempotency_key OPERATOR(pg_catalog.=) $2",
    {TEXTOID, TEXTOID});

std::string identifier_arg(FunctionCallInfo fcinfo, int argno, const char* name) {
    std::string value = text_arg(fcinfo, argno, name);
    if (value.empty()) throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, std::string(name) + " must not be empty");
    if (value.size() > kMaxIdentifierBytes)
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                       std::string(name) + " is " + std::to_string(value.size()) + " bytes, more than the limit of " +
                           std::to_string(kMaxIdentifierBytes));
    return value;
}

Datum interval_datum(int64_t us) {
    return pg_call([&] {
        Interval* iv = static_cast<Interval*>(palloc0(sizeof(Interval)));
        iv->time = us;
        return IntervalPGetDatum(iv);
    });
}

// Policy rows by scope, cached per backend (every begin needs one) and dropped when
// wh_idempotency_policies changes. Bounded: a deployment with a scope per caller must not
// grow a backend without limit.
constexpr std::size_t kMaxCachedScopes = 10000;
using PolicyRow = std::array<std::optional<int64_t>, 5>;
std::unordered_map<std::string, PolicyRow> policy_rows;
void forget_policies() { policy_rows.clear(); }
TableCache policy_cache("wh_idempotency_policies", forget_policies);

// By value: reading the settings next may drop this cache (an invalidation arrives).
PolicyRow policy_row(const std::string& scope) {
    if (!policy_cache.fresh()) policy_cache.mark_loaded();
    auto it = policy_rows.find(scope);
    if (it != policy_rows.end()) return it->second;
    PolicyRow row;
    if (policy_row_plan.execute({text_datum(scope)}) == 1) {
        for (int c = 0; c < 5; ++c) {
            bool isnull = false;
            Datum d = spi_value(0, c + 1, &isnull);
            if (!isnull) row[c] = interval_us(DatumGetIntervalP(d), "policy TTL");
        }
    }
    if (policy_rows.size() >= kMaxCachedScopes) policy_rows.clear();
    return policy_rows.emplace(scope, row).first->second;
}

// The effective policy of a scope: its row over the global settings. Needs SPI.
core::TtlPolicy load_policy(const std::string& scope) {
    const PolicyRow row = policy_row(scope);
    constexpr int64_t kSecond = 1000000;
    return {row[0].value_or(setting_int("idempotency_in_progress_ttl_seconds") * kSecond),
            row[1].value_or(setting_int("idempotency_result_ttl_seconds") * kSecond),
            row[2].value_or(setting_int("idempotency_result_ttl_min_seconds") * kSecond),
            row[3].value_or(setting_int("idempotency_result_ttl_max_seconds") * kSecond),
            row[4].value_or(setting_int("idempotency_tombstone_days") * USECS_PER_DAY)};
}

struct ReadKey {
    core::KeyRecord record;
    int64_t token = 0;
    std::optional<Datum> result;  // copied out of SPI memory
    std::optional<TimestampTz> completed_at;
};

std::optional<ReadKey> read_key(Datum scope, Datum key) {
    if (read_plan.execute({scope, key}) == 0) return std::nullopt;
    ReadKey r;
    bool isnull = false;
    Datum state_d = spi_value(0, 1, &isnull);  // not inside the pg_call below: spi_value has its own
    text* state = pg_call([&] { return DatumGetTextPP(state_d); });
    r.record.state = (VARSIZE_ANY_EXHDR(state) == 9 && memcmp(VARDATA_ANY(state), "completed", 9) == 0)
                         ? core::KeyState::completed
                         : core::KeyState::in_progress;
    r.token = DatumGetInt64(spi_value(0, 2, &isnull));
    Datum fp = spi_value(0, 3, &isnull);
    if (!isnull) {
        bytea* b = pg_call([&] { return DatumGetByteaPP(fp); });
        r.record.fingerprint.emplace(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
    }
    r.record.lease_expires_us = DatumGetTimestampTz(spi_value(0, 4, &isnull));
    Datum d = spi_value(0, 5, &isnull);
    r.record.result_expires_us = isnull ? 0 : DatumGetTimestampTz(d);
    d = spi_value(0, 6, &isnull);
    r.record.tombstone_expires_us = isnull ? 0 : DatumGetTimestampTz(d);
    d = spi_value(0, 7, &isnull);
    // SPI memory goes away at SPI_finish: copy the result into the caller's context.
    if (!isnull) r.result = pg_call([&] { return SPI_datumTransfer(d, false, -1); });
    d = spi_value(0, 8, &isnull);
    if (!isnull) r.completed_at = DatumGetTimestampTz(d);
    return r;
}

// Sleeps on the latch (no busy loop) for `ms`, waking early for interrupts.
void nap(long ms) {
    pg_call([&] {
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    });
}

struct BeginAnswer {
    const char* outcome = "claimed";
    std::optional<int64_t> token;
    std::optional<Datum> result;
    std::optional<TimestampTz> completed_at;
};

}  // namespace
}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// idempotency_begin(p_scope, p_key, p_fingerprint, p_in_progress_ttl, p_owner, p_wait, p_now, p_result_ttl)
//   RETURNS TABLE(outcome text, token bigint, result jsonb, completed_at timestamptz)
WB_ROUTED_FUNCTION(wb_idempotency_begin, citus_sql) {
    std::string scope = identifier_arg(fcinfo, 0, "p_scope");
    std::string key = identifier_arg(fcinfo, 1, "p_key");
    std::optional<std::string> fingerprint;
    if (!PG_ARGISNULL(2)) {
        bytea* b = pg_call([&] { return PG_GETARG_BYTEA_PP(2); });
        fingerprint.emplace(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
    }
    std::optional<int64_t> in_progress_ttl = interval_arg(fcinfo, 3, "p_in_progress_ttl");
    std::optional<std::string> owner;
    if (!PG_ARGISNULL(4)) owner = text_arg(fcinfo, 4, "p_owner");
    int64_t wait_us = interval_arg(fcinfo, 5, "p_wait").value_or(0);
    if (wait_us < 0) throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "p_wait must not be negative");
    TimestampTz now = timestamptz_arg(fcinfo, 6, "p_now");
    std::optional<int64_t> result_ttl_arg = interval_arg(fcinfo, 7, "p_result_ttl");
    if (in_progress_ttl) core::require_positive_ttl(*in_progress_ttl, "p_in_progress_ttl");
    if (result_ttl_arg) core::require_positive_ttl(*result_ttl_arg, "p_result_ttl");

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    BeginAnswer answer;
    {
        SpiConnection spi;
        Datum scope_d = text_datum(scope), key_d = text_datum(key);
        // Every check happens here, before any row is written (the seed's middleware checks too late).
        core::TtlPolicy policy = load_policy(scope);
        int64_t lease_us = in_progress_ttl.value_or(policy.in_progress_us);
        // The statements add the lease to p_now: an overflow there would not name the argument.
        (void)add_to_timestamp(now, lease_us, "p_now + the in-progress TTL");
        int64_t result_ttl_us = result_ttl_arg.value_or(policy.default_result_us);
        core::require_result_ttl_in_bounds(result_ttl_us, policy, scope);

        Datum owner_d = owner ? text_datum(*owner) : (Datum)0;
        Datum fp_d = (Datum)0;
        if (fingerprint) {
            fp_d = pg_call([&] {
                bytea* b = static_cast<bytea*>(palloc(VARHDRSZ + fingerprint->size()));
                SET_VARSIZE(b, VARHDRSZ + fingerprint->size());
                memcpy(VARDATA(b), fingerprint->data(), fingerprint->size());
                return PointerGetDatum(b);
            });
        }
        Datum result_ttl_d = interval_datum(result_ttl_us), lease_d = interval_datum(lease_us);
        // Waiting needs a fresh snapshot per look; under REPEATABLE READ a wait could never
        // see the owner finish, so it answers at once.
        const bool can_wait = wait_us > 0 && !IsolationUsesXactSnapshot();
        const TimestampTz give_up_at = GetCurrentTimestamp() + wait_us;
        long nap_ms = 5;

        for (int attempt = 0;; ++attempt) {
            if (attempt == kMaxRaceRetries)
                throw SqlError(ERRCODE_T_R_SERIALIZATION_FAILURE,
                               "could not begin idempotency key: it kept changing under concurrent callers");
            const char claim_nulls[] = {' ', ' ', owner ? ' ' : 'n', fingerprint ? ' ' : 'n', ' ', ' ', ' ', '\0'};
            if (claim_plan.execute({scope_d, key_d, owner_d, fp_d, result_ttl_d, TimestampTzGetDatum(now), lease_d},
                                   claim_nulls) == 1) {
                bool isnull = false;
                answer.token = DatumGetInt64(spi_value(0, 1, &isnull));
                break;
            }
            std::optional<ReadKey> existing = read_key(scope_d, key_d);
            if (!existing) continue;  // released or purged meanwhile: claim again

            core::BeginDecision decision = core::decide_begin(existing->record, fingerprint, now);
            if (decision == core::BeginDecision::reclaim) {
                const char nulls[] = {' ', ' ', ' ', owner ? ' ' : 'n', fingerprint ? ' ' : 'n', ' ', ' ', ' ', ' ', ' ', '\0'};
                Datum read_state = text_datum(existing->record.state == core::KeyState::completed ? "completed"
                                                                                                  : "in_progress");
                next_token_plan.execute({});
                bool no_token = false;
                const Datum new_token = spi_value(0, 1, &no_token);
                if (reclaim_plan.execute({scope_d, key_d, Int64GetDatum(existing->token), owner_d, fp_d, result_ttl_d,
                                          TimestampTzGetDatum(now), lease_d, read_state, new_token},
                                         nulls) == 1) {
                    bool isnull = false;
                    answer.token = DatumGetInt64(spi_value(0, 1, &isnull));
                    break;
                }
                continue;  // someone else took it first: look again
            }
            if (decision == core::BeginDecision::in_progress_duplicate && can_wait &&
                GetCurrentTimestamp() < give_up_at) {
                long left_ms = static_cast<long>((give_up_at - GetCurrentTimestamp()) / 1000) + 1;
                nap(std::min(nap_ms, left_ms));
                nap_ms = std::min(nap_ms * 2, 100L);
                attempt = -1;  // waiting is not racing
                continue;
            }
            answer.outcome = core::outcome_word(decision);
            if (decision == core::BeginDecision::completed_duplicate) answer.result = existing->result;
            if (decision == core::BeginDecision::completed_duplicate ||
                decision == core::BeginDecision::expired_duplicate)
                answer.completed_at = existing->completed_at;
            break;
        }
        spi.finish();
    }

    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    Datum outcome = text_datum(answer.outcome);
    pg_call([&] {
        Datum values[4] = {outcome, answer.token ? Int64GetDatum(*answer.token) : (Datum)0,
                           answer.result ? *answer.result : (Datum)0,
                           answer.completed_at ? TimestampTzGetDatum(*answer.completed_at) : (Datum)0};
        bool nulls[4] = {false, !answer.token, !answer.result, !answer.completed_at};
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    });
    return (Datum)0;
}

// idempotency_policy(p_scope) RETURNS TABLE(in_progress_ttl, default_result_ttl, min_result_ttl,
//   max_result_ttl, tombstone_ttl): the effective policy, as begin and complete apply it.
WB_ROUTED_FUNCTION(wb_idempotency_policy, citus_sql) {
    std::string scope = text_arg(fcinfo, 0, "p_scope");
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    core::TtlPolicy policy;
    {
        SpiConnection spi;
        policy = load_policy(scope);
        spi.finish();
    }
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    Datum values[5] = {interval_datum(policy.in_progress_us), interval_datum(policy.default_result_us),
                       interval_datum(policy.min_result_us), interval_datum(policy.max_result_us),
                       interval_datum(policy.tombstone_us)};
    pg_call([&] {
        bool nulls[5] = {false, false, false, false, false};
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    });
    return (Datum)0;
}

// idempotency_complete(p_scope, p_key, p_token, p_result, p_result_ttl, p_now) RETURNS text
WB_ROUTED_FUNCTION(wb_idempotency_complete, citus_sql) {
    std::string scope = identifier_arg(fcinfo, 0, "p_scope");
    std::string key = identifier_arg(fcinfo, 1, "p_key");
    require_not_null(fcinfo, 2, "p_token");
    int64_t token = PG_GETARG_INT64(2);
    std::optional<int64_t> result_ttl = interval_arg(fcinfo, 4, "p_result_ttl");
    TimestampTz now = timestamptz_arg(fcinfo, 5, "p_now");

    SpiConnection spi;
    Datum scope_d = text_datum(scope), key_d = text_datum(key);
    core::TtlPolicy policy = load_policy(scope);
    if (result_ttl) core::require_result_ttl_in_bounds(*result_ttl, policy, scope);
    const char nulls[] = {' ', ' ', ' ', PG_ARGISNULL(3) ? 'n' : ' ', ' ', result_ttl ? ' ' : 'n', ' ', '\0'};
    uint64 rows = 0;
    try {
        rows = complete_plan.execute({scope_d, key_d, Int64GetDatum(token), PG_ARGISNULL(3) ? (Datum)0 : PG_GETARG_DATUM(3),
                                      TimestampTzGetDatum(now), result_ttl ? interval_datum(*result_ttl) : (Datum)0,
                                      interval_datum(policy.tombstone_us)},
                                     nulls);
    } catch (const PgError& e) {
        // The result TTL may be the one stored at begin, known only to the statement; its only
        // timestamp arithmetic is on p_now, so an overflow there is p_now's.
        if (e.data() == nullptr || e.data()->sqlerrcode != ERRCODE_DATETIME_VALUE_OUT_OF_RANGE) throw;
        throw SqlError(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
                       "p_now + the result TTL + the tombstone TTL is out of the timestamp range");
    }
    spi.finish();
    return text_datum(rows == 1 ? "completed" : "complete_conflict");
}

// idempotency_release(p_scope, p_key, p_token, p_now) RETURNS text
WB_ROUTED_FUNCTION(wb_idempotency_release, citus_sql) {
    std::string scope = identifier_arg(fcinfo, 0, "p_scope");
    std::string key = identifier_arg(fcinfo, 1, "p_key");
    require_not_null(fcinfo, 2, "p_token");
    int64_t token = PG_GETARG_INT64(2);
    (void)timestamptz_arg(fcinfo, 3, "p_now");

    SpiConnection spi;
    Datum scope_d = text_datum(scope), key_d = text_datum(key);
    const char* outcome = "released";
    if (release_plan.execute({scope_d, key_d, Int64GetDatum(token)}) != 1)
        outcome = exists_plan.execute({scope_d, key_d}) == 1 ? "not_owner" : "not_found";
    spi.finish();
    return text_datum(outcome);
}
