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

// Drops generation `relid`; records whose message still waits move first to the generation that
// starts at `forward` (the oldest one that stays).
void retire(Oid relid, TimestampTz forward, int lock_timeout_ms, GenerationRetirement& out) {
    const std::string name = "whizbang." + relation_name(relid);
    // Counted before the lock: the generation left the window, so only a store with a p_now that
    // old could still add a record (the count then misses it; the drop does not).
    const int64_t records = first_int8("SELECT pg_catalog.count(*) FROM " + name);
    // Stores and readers wait for the moment the moves and the drop take: dropping a partition
    // locks its parent so (heap_drop_with_catalog), and taking it first means the moves see
    // every record of the generation and no store probes it meanwhile.
    lock_dedup_table("ACCESS EXCLUSIVE", lock_timeout_ms);
    // From the waiting messages to their records: the inbox and dead letters are small next to a
    // generation, so this reads the generation's key index for them, not the generation.
    const std::string forward_literal = core::generations::utc_literal(forward);
    const uint64 moved = run_sql(
        "WITH waiting AS (SELECT i.message_id, i.consumer FROM whizbang.wh_inbox i"
        "                 UNION SELECT l.message_id, l.consumer FROM whizbang.wh_dead_letters l"
        "                  WHERE l.source OPERATOR(pg_catalog.=) 'inbox' AND l.consumer IS NOT NULL),"
        "     m AS (DELETE FROM " + name + " x USING waiting w"
        "            WHERE x.message_id OPERATOR(pg_catalog.=) w.message_id"
        "              AND x.consumer OPERATOR(pg_catalog.=) w.consumer"
        "           RETURNING x.consumer, x.message_id, x.observation_count, x.conflict_count, x.fingerprint,"
        "                     x.partition_number)"
        " INSERT INTO whizbang.wh_message_deduplication"
        "   (consumer, message_id, first_seen_at, observation_count, conflict_count, fingerprint, partition_number)"
        " SELECT m.consumer, m.message_id, '" + forward_literal + "'::pg_catalog.timestamptz, m.observation_count,"
        "        m.conflict_count, m.fingerprint, m.partition_number FROM m");
    run_sql("DROP TABLE " + name);
    out.dropped += 1;
    out.moved += static_cast<int64_t>(moved);
    out.records += records - static_cast<int64_t>(moved);
}

}  // namespace

void retire_generations(TimestampTz now, int lock_timeout_ms, GenerationRetirement& out) {
    const int64 period = generation_period();
    const TimestampTz horizon = now - setting_int("dedup_retention_days") * USECS_PER_DAY;
    // With a generation to drop, ACCESS EXCLUSIVE comes first, before the creation's EXCLUSIVE:
    // holding EXCLUSIVE while waiting for ACCESS EXCLUSIVE deadlocks with a store that holds
    // ACCESS SHARE and waits for ROW EXCLUSIVE (dedup_store.cpp takes them in that order).
    const std::vector<GenerationBound> before = list_generations();
    bool locked = false;
    if (std::any_of(before.begin(), before.end(), [&](const auto& b) { return b.end <= horizon; })) {
        locked = unless_lock_busy([&] { lock_dedup_table("ACCESS EXCLUSIVE", lock_timeout_ms); });
        if (!locked) out.busy += 1;
    }
    // Ahead of time, so that stores find their generation made (creating one waits for every
    // store's transaction to end).
    int created = 0;
    if (unless_lock_busy([&] { created = create_generations(now, now + period + 1, lock_timeout_ms); }))
        out.created += created;
    else
        out.busy += 1;
    if (!locked) return;

    // DROP needs the owner's rights; the caller needs only maintenance's (DELETE on the table).
    AsExtensionOwner owner;
    for (;;) {
        const std::vector<GenerationBound> bounds = list_generations();
        const GenerationBound* oldest = nullptr;
        const GenerationBound* stays = nullptr;
        for (const auto& b : bounds) {
            if (b.end <= horizon && oldest == nullptr) oldest = &b;
            if (b.end > horizon && stays == nullptr) stays = &b;
        }
        if (oldest == nullptr) break;
        if (stays == nullptr) {
            // Nothing stored for a whole window: the generation of now takes what still waits.
            created = 0;
            if (!unless_lock_busy([&] { created = create_generations(now, now + 1, lock_timeout_ms); })) {
                out.busy += 1;
                break;
            }
            out.created += created;
            continue;
        }
        const Oid relid = oldest->relid;
        const TimestampTz forward = stays->start;
        if (!unless_lock_busy([&] { retire(relid, forward, lock_timeout_ms, out); })) {
            out.busy += 1;
            break;
        }
    }
}

}  // namespace whizbang::pg
