#include <climits>

#include "pg/store/generations.h"

#include "pg/boundary/owner.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/boundary/statement_settings.h"
#include "pg/citus/shard_scope.h"
#include "pg/store/dedup_filters.h"

namespace whizbang::pg {
namespace {

namespace gen = core::generations;

int64 bound_value(PartitionRangeDatumKind kind, Datum value) {
    if (kind == PARTITION_RANGE_DATUM_VALUE) return DatumGetTimestampTz(value);
    return kind == PARTITION_RANGE_DATUM_MINVALUE ? INT64_MIN : INT64_MAX;
}

// A bound of the timestamptz range: periods at its ends reach past what timestamptz can hold.
std::string bound_literal(int64 t) {
    if (t <= MIN_TIMESTAMP) return "MINVALUE";
    if (t >= END_TIMESTAMP) return "MAXVALUE";
    return "'" + gen::utc_literal(t) + "'";
}

std::vector<gen::Span> spans_of(const std::vector<GenerationBound>& bounds) {
    std::vector<gen::Span> spans;
    for (const auto& b : bounds) spans.push_back(gen::Span{b.start, b.end});
    return spans;
}

}  // namespace

int read_generation_bounds(Relation parent, GenerationBound** out) {
    PartitionDesc desc = RelationGetPartitionDesc(parent, true);
    GenerationBound* bounds = static_cast<GenerationBound*>(palloc(sizeof(GenerationBound) * Max(desc->nparts, 1)));
    int n = 0;
    PartitionBoundInfo info = desc->boundinfo;
    // A range bound list: the partition between datums[j] and datums[j + 1] is indexes[j + 1]
    // (-1 where no partition covers the gap), as get_partition_for_tuple reads it.
    if (info != nullptr && info->strategy == PARTITION_STRATEGY_RANGE) {
        for (int j = 0; j + 1 < info->ndatums; ++j) {
            int index = info->indexes[j + 1];
            if (index < 0) continue;
            bounds[n].relid = desc->oids[index];
            bounds[n].start = bound_value(info->kind[j][0], info->datums[j][0]);
            bounds[n].end = bound_value(info->kind[j + 1][0], info->datums[j + 1][0]);
            ++n;
        }
    }
    *out = bounds;
    return n;
}

bool dedup_in_generations() {
    return pg_call([] {
        Oid relid = whizbang_relid_unguarded(kDedupTable);
        return OidIsValid(relid) && get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE;
    });
}

int64 generation_period() {
    const int64 hours = setting_int("dedup_retention_days") * 24;
    const int64 parts = std::max<int64>(1, setting_int("dedup_generations"));
    return std::max<int64>(1, (hours + parts - 1) / parts) * gen::kMicrosPerHour;
}

std::vector<GenerationBound> list_generations() {
    GenerationBound* bounds = nullptr;
    int n = pg_call([&] {
        Relation parent = table_open(whizbang_relid_unguarded(kDedupTable), AccessShareLock);
        int count = RelationGetForm(parent)->relkind == RELKIND_PARTITIONED_TABLE
                        ? read_generation_bounds(parent, &bounds)
                        : 0;
        table_close(parent, NoLock);
        return count;
    });
    return std::vector<GenerationBound>(bounds, bounds + n);
}

void lock_table(const std::string& qualified_name, const char* mode, int lock_timeout_ms) {
    const std::string sql = "LOCK TABLE " + qualified_name + " IN " + mode + " MODE";
    if (lock_timeout_ms <= 0) {
        run_sql(sql);
        return;
    }
    // lock_timeout for this statement only.
    const std::string value = std::to_string(lock_timeout_ms);
    with_settings({{"lock_timeout", value.c_str()}}, [&] { run_sql(sql); });
}

void lock_dedup_table(const char* mode, int lock_timeout_ms) {
    lock_table("whizbang.wh_message_deduplication", mode, lock_timeout_ms);
}

int create_generations(TimestampTz from, TimestampTz until, int lock_timeout_ms) {
    const int64 period = generation_period();
    SpiConnection spi;
    // Generations belong to the table's owner, whoever stores the record that needs one.
    AsExtensionOwner owner;
    // Nothing missing (maintenance's usual case): no lock, which would hold every store off
    // until the caller's transaction ends.
    if (gen::spans_to_cover(spans_of(list_generations()), from, until, period).empty()) {
        spi.finish();
        return 0;
    }
    // Conflicts with the ROW EXCLUSIVE of every store (see generations.h), not with readers.
    lock_dedup_table("EXCLUSIVE", lock_timeout_ms);
    const std::vector<gen::Span> made = gen::spans_to_cover(spans_of(list_generations()), from, until, period);
    for (const gen::Span& s : made) {
        const std::string name = gen::generation_name(kDedupTable, s);
        run_sql("CREATE TABLE whizbang." + name +
                " (LIKE whizbang.wh_message_deduplication INCLUDING DEFAULTS) WITH (fillfactor = 90)");
        run_sql("ALTER TABLE whizbang." + name + " ADD CONSTRAINT " + name +
                "_pkey PRIMARY KEY (message_id, consumer) WITH (fillfactor = 90)");
        run_sql("ALTER TABLE whizbang.wh_message_deduplication ATTACH PARTITION whizbang." + name + " FOR VALUES FROM (" +
                bound_literal(s.start) + ") TO (" + bound_literal(s.end) + ")");
        run_sql("COMMENT ON TABLE whizbang." + name + " IS 'A whizbang dedup generation: the records first seen from " +
                gen::utc_literal(s.start) + " until " + gen::utc_literal(s.end) +
                ". Read them through whizbang.wh_message_deduplication; maintenance drops the generation whole.'");
    }
    spi.finish();
    return static_cast<int>(made.size());
}

bool generation_for_store(TimestampTz p_now) {
    const std::vector<gen::Span> spans = spans_of(list_generations());
    const int64 period = generation_period();
    const int64 retention = setting_int("dedup_retention_days") * USECS_PER_DAY;
    const TimestampTz clock = pg_call([] { return GetCurrentTransactionStartTimestamp(); });
    switch (gen::place(spans, p_now, clock, retention, period)) {
        case gen::Placement::expired: return false;
        case gen::Placement::too_far_ahead: {
            const std::string limit = gen::utc_literal(clock + period);
            throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                           "p_now " + gen::utc_literal(p_now) + " lies beyond the dedup generations made ahead",
                           "A store makes generations up to one period past the transaction's start (until " + limit +
                               "); maintenance makes the generations ahead of its own p_now.",
                           "Store with the default p_now (the current time); to simulate a later time, run "
                           "whizbang.perform_maintenance(p_now => ...) at that time first.");
        }
        case gen::Placement::inside: break;
    }
    if (!gen::span_holding(spans, p_now)) {
        create_generations(p_now, p_now + 1);
        return true;
    }
    // A backfill into a sealed generation unseals it first (dedup_filters.h), before the store
    // holds it open: two such stores queue for its lock instead of deadlocking on an upgrade.
    // (Maintenance seals spans that have ended by its own p_now, which may lie ahead.) Its lock
    // waits at most kUnsealLockTimeoutMs: while it waits, every store queues behind it.
    for (const GenerationBound& b : list_generations())
        if (b.start <= p_now && p_now < b.end) unseal_generation(b.relid, kUnsealLockTimeoutMs);
    return true;
}

}  // namespace whizbang::pg
