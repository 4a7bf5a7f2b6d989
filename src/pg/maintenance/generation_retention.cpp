#include "core/generation_span.h"

#include <algorithm>
#include <string>

#include "pg/maintenance/generation_retention.h"
#include "pg/boundary/owner.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/store/generations.h"


namespace whizbang::pg {
namespace {

// Runs f in a subtransaction; false (and f's work undone) when a lock was not granted in time.
template <typename F>
bool unless_lock_busy(F&& f) {
    MemoryContext context = CurrentMemoryContext;
    ResourceOwner resources = CurrentResourceOwner;
    auto leave = [&](bool commit) {
        pg_call([&] {
            if (commit)
                ReleaseCurrentSubTransaction();
            else
                RollbackAndReleaseCurrentSubTransaction();
            MemoryContextSwitchTo(context);
            CurrentResourceOwner = resources;
        });
    };
    pg_call([&] {
        BeginInternalSubTransaction(nullptr);
        MemoryContextSwitchTo(context);
    });
    try {
        f();
        leave(true);
        return true;
    } catch (const PgError& e) {
        const int code = e.data() ? e.data()->sqlerrcode : 0;
        leave(false);
        if (code != ERRCODE_LOCK_NOT_AVAILABLE) throw;
        return false;
    } catch (...) {
        leave(false);
        throw;
    }
}

uint64 run_sql(const std::string& sql) {
    return pg_call([&] {
        int rc = SPI_execute(sql.c_str(), false, 0);
        if (rc < 0) elog(ERROR, "whizbang: SPI_execute failed (%d): %s", rc, sql.c_str());
        return SPI_processed;
    });
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

std::string quoted_generation(Oid relid) {
    const std::string name = relation_name(relid);
    return "whizbang." + std::string(pg_call([&] { return quote_identifier(name.c_str()); }));
}

// Phase one, beside the stores: the expired generations (all older than `cutoff`) are locked
// against new records (SHARE ROW EXCLUSIVE: the stores' probes, ACCESS SHARE, go on; only a
// store whose p_now falls into one of them waits), the records whose message still waits in the
// inbox or in its dead letters move to the generation that starts at `forward`, and the records
// left are counted. The look-up of the waiting messages reads the inbox once for all of them,
// under no lock that holds a store up: under the drop's lock it took seconds with a backlog.
// A concurrent redelivery of a moving id waits for this transaction (its probe sees the move in
// progress) and then finds the record in its new generation (core/generation_guard.h).
void move_waiting_forward(const std::vector<GenerationBound>& expired, TimestampTz cutoff, TimestampTz forward,
                          int lock_timeout_ms, GenerationRetirement& out) {
    for (const GenerationBound& g : expired) lock_table(quoted_generation(g.relid), "SHARE ROW EXCLUSIVE", lock_timeout_ms);
    const std::string cutoff_literal = "'" + core::generations::utc_literal(cutoff) + "'::pg_catalog.timestamptz";
    const std::string forward_literal = "'" + core::generations::utc_literal(forward) + "'::pg_catalog.timestamptz";
    const uint64 moved = run_sql(
        // UNION ALL: a record both waiting messages name is deleted (and returned) once.
        "WITH waiting AS (SELECT i.message_id, i.consumer FROM whizbang.wh_inbox i"
        "                 UNION ALL SELECT l.message_id, l.consumer FROM whizbang.wh_dead_letters l"
        "                  WHERE l.source OPERATOR(pg_catalog.=) 'inbox' AND l.consumer IS NOT NULL),"
        "     m AS (DELETE FROM whizbang.wh_message_deduplication x USING waiting w"
        "            WHERE x.first_seen_at OPERATOR(pg_catalog.<) " + cutoff_literal +
        "              AND x.message_id OPERATOR(pg_catalog.=) w.message_id"
        "              AND x.consumer OPERATOR(pg_catalog.=) w.consumer"
        "           RETURNING x.consumer, x.message_id, x.observation_count, x.conflict_count, x.fingerprint,"
        "                     x.partition_number)"
        " INSERT INTO whizbang.wh_message_deduplication"
        "   (consumer, message_id, first_seen_at, observation_count, conflict_count, fingerprint, partition_number)"
        " SELECT m.consumer, m.message_id, " + forward_literal + ", m.observation_count,"
        "        m.conflict_count, m.fingerprint, m.partition_number FROM m");
    out.moved += static_cast<int64_t>(moved);
    // Exact: nothing can be added to these generations while their lock is held.
    out.records += first_int8("SELECT pg_catalog.count(*) FROM whizbang.wh_message_deduplication"
                              " WHERE first_seen_at OPERATOR(pg_catalog.<) " + cutoff_literal);
}

}  // namespace

void retire_generations(TimestampTz now, int lock_timeout_ms, GenerationRetirement& out) {
    const int64 period = generation_period();
    const TimestampTz horizon = now - setting_int("dedup_retention_days") * USECS_PER_DAY;
    auto left_window = [&](const std::vector<GenerationBound>& bounds) {
        std::vector<GenerationBound> expired;
        for (const auto& b : bounds)
            if (b.end <= horizon) expired.push_back(b);
        return expired;
    };
    std::vector<GenerationBound> bounds = list_generations();
    std::vector<GenerationBound> expired = left_window(bounds);
    // Ahead of time, so that stores find their generation made (creating one waits for every
    // store's transaction to end). With a generation to drop, this happens under the drop's lock.
    if (expired.empty()) {
        int created = 0;
        if (unless_lock_busy([&] { created = create_generations(now, now + period + 1, lock_timeout_ms); }))
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
        if (!unless_lock_busy([&] {
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
    for (const auto& b : bounds) {
        if (b.end <= horizon) cutoff = std::max<TimestampTz>(cutoff, b.end);
        if (b.end > horizon) forward = std::min<TimestampTz>(forward, b.start);
    }
    if (!unless_lock_busy([&] { move_waiting_forward(expired, cutoff, forward, lock_timeout_ms, out); })) {
        out.busy += 1;
        return;
    }
    // Phase two, a moment: ACCESS EXCLUSIVE on the table (dropping a partition locks its parent
    // so, heap_drop_with_catalog), the generations made ahead, the expired ones dropped. Taken
    // while holding only ROW EXCLUSIVE on it, which blocks no store's lock.
    int created = 0;
    if (!unless_lock_busy([&] {
            lock_dedup_table("ACCESS EXCLUSIVE", lock_timeout_ms);
            created = create_generations(now, now + period + 1, lock_timeout_ms);
            for (const GenerationBound& g : expired) run_sql("DROP TABLE " + quoted_generation(g.relid));
        })) {
        out.busy += 1;
        out.records = 0;  // counted for a drop that did not happen
        return;
    }
    out.created += created;
    out.dropped += static_cast<int64_t>(expired.size());
}

}  // namespace whizbang::pg
