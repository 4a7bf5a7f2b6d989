#include "core/generation_span.h"

#include <algorithm>
#include <string>
#include <utility>

#include "pg/maintenance/generation_retention.h"
#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/boundary/owner.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/boundary/statement_settings.h"
#include "pg/boundary/subtransaction.h"
#include "pg/citus/shard_scope.h"
#include "pg/store/dedup_filters.h"
#include "pg/store/generations.h"


namespace whizbang::pg {
namespace {

// Runs f in a subtransaction, every lock it waits for under lock_timeout = `lock_timeout_ms`:
// not only the LOCK statements, also what DDL and DML lock on their own while the parent is held
// (a DROP TABLE waits for whoever holds its generation: an idle transaction that read it, an
// anti-wraparound autovacuum; every store would wait behind the parent's lock meanwhile). False
// (and f's work undone) when a lock was not granted in time: the next run retries.
template <typename F>
bool unless_lock_busy(int lock_timeout_ms, F&& f) {
    const std::string timeout = std::to_string(lock_timeout_ms);
    return in_subtransaction(
        [&] {
            if (lock_timeout_ms > 0)
                with_settings({{"lock_timeout", timeout.c_str()}}, f);
            else
                f();
        },
        [](int code) { return code == ERRCODE_LOCK_NOT_AVAILABLE; });
}

int64_t first_int8(const std::string& sql) {
    run_sql(sql);
    bool isnull = false;
    Datum d = spi_value(0, 1, &isnull);
    return isnull ? 0 : DatumGetInt64(d);
}

std::string relation_name(Oid relid) {
    const char* name = pg_call([&] { return get_rel_name(relid); });
    if (name == nullptr) throw SqlError(ERRCODE_UNDEFINED_TABLE, "whizbang: a dedup generation vanished");
    return name;
}

std::string timestamptz_literal(TimestampTz t) {
    return "'" + core::generations::utc_literal(t) + "'::pg_catalog.timestamptz";
}

std::string quoted_generation(Oid relid) {
    const std::string name = relation_name(relid);
    return "whizbang." + std::string(pg_call([&] { return quote_identifier(name.c_str()); }));
}

// The records, among those older than `cutoff`, whose message still waits in the inbox or in
// its dead letters.
struct Waiting {
    std::vector<std::string> consumers;
    std::vector<core::Uuid> ids;
};

// Phase one, beside the stores: the expired generations (all older than `cutoff`) are locked
// against new records (SHARE ROW EXCLUSIVE: the stores' probes, ACCESS SHARE, go on; only a
// store whose p_now falls into one of them waits); then the records whose message still waits
// are found, reading the inbox once for all of them (under the drop's lock this took seconds
// with a backlog), and the records are counted. While the generations are locked no record
// enters them, and no message can start waiting for one of their records without being in
// the inbox or the dead letters now (a new delivery of such an id is a duplicate, not stored).
Waiting find_waiting(const std::vector<GenerationBound>& expired, const std::string& cutoff_literal,
                     int lock_timeout_ms, GenerationRetirement& out) {
    for (const GenerationBound& g : expired) lock_table(quoted_generation(g.relid), "SHARE ROW EXCLUSIVE", lock_timeout_ms);
    // The look-up hashes the waiting messages and reads every expired record: on one core (a
    // parallel plan took 41% of the cores from the stores with 10,000,000 expired records), and
    // in memory (the default work_mem spilled 500,000 waiting messages to temporary files).
    uint64 rows = 0;
    with_settings({{"max_parallel_workers_per_gather", "0"}, {"work_mem", "64MB"}}, [&] { rows = run_sql(
        "SELECT DISTINCT x.consumer, x.message_id FROM whizbang.wh_message_deduplication x"
        "  JOIN (SELECT i.message_id, i.consumer FROM whizbang.wh_inbox/*message*/ i"
        "        UNION ALL SELECT l.message_id, l.consumer FROM whizbang.wh_dead_letters l"
        "         WHERE l.source OPERATOR(pg_catalog.=) 'inbox' AND l.consumer IS NOT NULL) w"
        "    ON x.message_id OPERATOR(pg_catalog.=) w.message_id AND x.consumer OPERATOR(pg_catalog.=) w.consumer"
        " WHERE x.first_seen_at OPERATOR(pg_catalog.<) " + cutoff_literal); });
    Waiting waiting;
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        waiting.consumers.push_back(text_from_datum(spi_value(r, 1, &isnull)));
        waiting.ids.push_back(uuid_from_datum(spi_value(r, 2, &isnull)));
    }
    with_settings({{"max_parallel_workers_per_gather", "0"}}, [&] {
        out.records += first_int8("SELECT pg_catalog.count(*) FROM whizbang.wh_message_deduplication"
                                  " WHERE first_seen_at OPERATOR(pg_catalog.<) " + cutoff_literal);
    });
    return waiting;
}

// Phase two, under ACCESS EXCLUSIVE (no store runs): the waiting messages' records move to the
// generation that starts at `forward` (first_seen_at becomes its start). They are few, so this
// is a moment; and with no store running, no probe sees a record between two generations.
void move_forward(const Waiting& waiting, const std::string& cutoff_literal, TimestampTz forward,
                  Oid forward_relid, int lock_timeout_ms, GenerationRetirement& out) {
    if (waiting.ids.empty()) return;
    // The records enter that generation: sealed, it is unsealed first (its trigger would refuse
    // them, its filter would miss them); the next run seals it again. No store runs meanwhile.
    unseal_generation(forward_relid, lock_timeout_ms);
    const std::string forward_literal = timestamptz_literal(forward);
    const std::string sql =
        "WITH m AS (DELETE FROM whizbang.wh_message_deduplication x"
        "            USING ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS w(consumer, id)"
        "            WHERE x.first_seen_at OPERATOR(pg_catalog.<) " + cutoff_literal +
        "              AND x.message_id OPERATOR(pg_catalog.=) w.id AND x.consumer OPERATOR(pg_catalog.=) w.consumer"
        "           RETURNING x.consumer, x.message_id, x.observation_count, x.conflict_count, x.fingerprint,"
        "                     x.partition_number)"
        " INSERT INTO whizbang.wh_message_deduplication"
        "   (consumer, message_id, first_seen_at, observation_count, conflict_count, fingerprint, partition_number)"
        " SELECT m.consumer, m.message_id, " + forward_literal + ", m.observation_count,"
        "        m.conflict_count, m.fingerprint, m.partition_number FROM m";
    Datum consumers = text_array(waiting.consumers);
    Datum ids = uuid_array(waiting.ids);
    const uint64 moved = pg_call([&] {
        Oid types[2] = {TEXTARRAYOID, UUIDARRAYOID};
        Datum values[2] = {consumers, ids};
        int rc = SPI_execute_with_args(sql.c_str(), 2, types, values, nullptr, false, 0);
        if (rc < 0) elog(ERROR, "whizbang: SPI_execute_with_args failed (%d) moving dedup records forward", rc);
        return SPI_processed;
    });
    out.moved += static_cast<int64_t>(moved);
    out.records -= static_cast<int64_t>(moved);
}

// Retirement runs its DDL and moves as the extension's owner; the caller must hold what the row
// purge of a single table would need (DELETE on it), checked before anything runs as the owner.
void require_delete_on_dedup_table() {
    pg_call([] {
        Oid relid = whizbang_relid_unguarded(kDedupTable);
        if (pg_class_aclcheck(relid, GetUserId(), ACL_DELETE) == ACLCHECK_OK) return;
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("permission denied for table whizbang.%s", kDedupTable),
                        errdetail("purge_old_deduplication makes and drops dedup generations, which deletes records: "
                                  "it needs DELETE on the table."),
                        errhint("Grant the maintenance capability: SELECT whizbang.grant_admin('<role>', "
                                "ARRAY['maintenance']).")));
    });
}

}  // namespace

void retire_generations(TimestampTz now, int lock_timeout_ms, GenerationRetirement& out) {
    require_delete_on_dedup_table();
    const int64 period = generation_period();
    const TimestampTz horizon = now - setting_int("dedup_retention_days") * USECS_PER_DAY;
    auto left_window = [&](const std::vector<GenerationBound>& bounds) {
        std::vector<GenerationBound> expired;
        for (const auto& b : bounds)
            if (b.end <= horizon) expired.push_back(b);
        return expired;
    };
    std::vector<GenerationBound> bounds = list_generations();
    // Seal first, beside the stores (SHARE ROW EXCLUSIVE on each generation sealed: only a
    // backfill into it waits), never under the drop's ACCESS EXCLUSIVE: reading a generation's
    // keys takes a while. Every seal reads with a snapshot of its own, whatever the isolation.
    out.sealed += seal_generations(now, horizon, lock_timeout_ms);
    std::vector<GenerationBound> expired = left_window(bounds);
    // find_waiting must see every message stored before its locks were granted: a store that
    // committed after this transaction's snapshot, whose record is in an expired generation
    // (a p_now older than this run's), would have its waiting message's record dropped. One
    // snapshot for the transaction cannot see it, and no later snapshot may drive its deletes:
    // the drop is left to a READ COMMITTED run (the worker, run_maintenance, autocommit).
    if (!expired.empty() && pg_call([] { return IsolationUsesXactSnapshot(); })) {
        out.needs_fresh_snapshot = true;
        expired.clear();
    }
    // Ahead of time, so that stores find their generation made (creating one waits for every
    // store's transaction to end). With a generation to drop, this happens under the drop's lock.
    if (expired.empty()) {
        int created = 0;
        if (unless_lock_busy(lock_timeout_ms, [&] { created = create_generations(now, now + period + 1, lock_timeout_ms); }))
            out.created += created;
        else
            out.busy += 1;
        return;
    }
    // DROP needs the owner's rights; the caller needs only maintenance's (DELETE on the table).
    AsExtensionOwner owner;
    if (std::none_of(bounds.begin(), bounds.end(), [&](const auto& b) { return b.end > horizon; })) {
        // Nothing stored for a whole window: the generation of now takes what still waits. Made
        // under ACCESS EXCLUSIVE taken first: EXCLUSIVE held while waiting for ACCESS EXCLUSIVE
        // would deadlock with a store that holds ACCESS SHARE and waits for ROW EXCLUSIVE.
        int created = 0;
        if (!unless_lock_busy(lock_timeout_ms, [&] {
                lock_dedup_table("ACCESS EXCLUSIVE", lock_timeout_ms);
                created = create_generations(now, now + 1, lock_timeout_ms);
            })) {
            out.busy += 1;
            return;
        }
        out.created += created;
        bounds = list_generations();
        expired = left_window(bounds);
    }
    TimestampTz cutoff = INT64_MIN, forward = INT64_MAX;
    Oid forward_relid = InvalidOid;
    for (const auto& b : bounds) {
        if (b.end <= horizon) cutoff = std::max<TimestampTz>(cutoff, b.end);
        if (b.end > horizon && b.start < forward) {
            forward = b.start;
            forward_relid = b.relid;
        }
    }
    const std::string cutoff_literal = timestamptz_literal(cutoff);
    Waiting waiting;
    GenerationRetirement found;
    if (!unless_lock_busy(lock_timeout_ms, [&] { waiting = find_waiting(expired, cutoff_literal, lock_timeout_ms, found); })) {
        out.busy += 1;
        return;
    }
    // Phase two, a moment: ACCESS EXCLUSIVE on the table (dropping a partition locks its parent
    // so, heap_drop_with_catalog), taken holding only ACCESS SHARE on it, which blocks no store's
    // lock; the moves, the generations made ahead, the expired ones dropped.
    int created = 0;
    if (!unless_lock_busy(lock_timeout_ms, [&] {
            lock_dedup_table("ACCESS EXCLUSIVE", lock_timeout_ms);
            move_forward(waiting, cutoff_literal, forward, forward_relid, lock_timeout_ms, found);
            created = create_generations(now, now + period + 1, lock_timeout_ms);
            for (const GenerationBound& g : expired) {
                forget_filter(g.relid);
                run_sql("DROP TABLE " + quoted_generation(g.relid));
            }
        })) {
        out.busy += 1;
        return;
    }
    out.records += found.records;
    out.moved += found.moved;
    out.created += created;
    out.dropped += static_cast<int64_t>(expired.size());
}

}  // namespace whizbang::pg
