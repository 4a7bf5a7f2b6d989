// dedup_insert and dedup_insert_many (DESIGN §3.1).
//
// The distinct ids of a batch are handled sorted by id, so overlapping concurrent batches
// always meet their keys in the same order and wait for each other at most (no 40P01).
// New ids are inserted natively (dedup_store.cpp); ids already on record go through one
// set-based upsert that counts the observation and returns the stored fingerprint.
// Outcomes are then worked out in C++ (core/dedup_plan) and, only when some id needs it, a
// last statement fixes counters or removes ids that were too old to record.
#include <algorithm>
#include <cstring>

#include "core/dedup_plan.h"
#include "core/partition.h"
#include "pg/boundary/args.h"
#include "pg/boundary/owner.h"
#include "pg/boundary/arrays.h"
#include "pg/store/dedup.h"
#include "pg/citus/citus_route.h"
#include "pg/store/dedup_store.h"
#include "pg/citus/shard_scope.h"
#include "pg/store/generations.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/boundary/required_privileges.h"

namespace whizbang::pg {
namespace {

constexpr std::size_t kMaxConsumerBytes = 1024;

// partition_number ($6): the record's partition inside a routed call, not written on a single
// server (shard_sql's /*+SHARD*/).
CachedPlan upsert_plan(
    "INSERT INTO whizbang.wh_message_deduplication AS d"
    "  (consumer, message_id, first_seen_at, observation_count, fingerprint/*+SHARD , partition_number*/)"
    " SELECT $1, u.id, $2, u.n, u.fp/*+SHARD , u.part*/ FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4),"
    "  pg_catalog.unnest($5)/*+SHARD , pg_catalog.unnest($6)*/) AS u(id, n, fp/*+SHARD , part*/)"
    " ON CONFLICT (consumer, message_id) DO UPDATE"
    "  SET observation_count = d.observation_count OPERATOR(pg_catalog.+) excluded.observation_count"
    " RETURNING d.message_id, (d.xmax OPERATOR(pg_catalog.=) 0), d.fingerprint",
    {TEXTOID, TIMESTAMPTZOID, UUIDARRAYOID, INT4ARRAYOID, BYTEAARRAYOID, INT4ARRAYOID});

// Rows named here were locked by the upsert of the same call: no new lock order arises.
CachedPlan adjust_plan(
    "UPDATE whizbang.wh_message_deduplication AS d"
    " SET observation_count = d.observation_count OPERATOR(pg_catalog.+) u.o,"
    "     conflict_count = d.conflict_count OPERATOR(pg_catalog.+) u.c"
    " FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4)) AS u(id, o, c)"
    " WHERE d.consumer OPERATOR(pg_catalog.=) $1 AND d.message_id OPERATOR(pg_catalog.=) u.id",
    {TEXTOID, UUIDARRAYOID, INT4ARRAYOID, INT4ARRAYOID});

// A table in generations has no unique index across them, so no ON CONFLICT: ids on record
// are counted by an UPDATE through the parent, and only the guarded native insertion (or,
// under a table lock, the INSERT below) records new ones.
CachedPlan update_plan(
    "UPDATE whizbang.wh_message_deduplication AS d"
    " SET observation_count = d.observation_count OPERATOR(pg_catalog.+) u.n"
    " FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)) AS u(id, n)"
    " WHERE d.consumer OPERATOR(pg_catalog.=) $1 AND d.message_id OPERATOR(pg_catalog.=) u.id"
    " RETURNING d.message_id, d.fingerprint",
    {TEXTOID, UUIDARRAYOID, INT4ARRAYOID});

// The same, for ids whose record the native insertion found: its first_seen_at ($4) prunes
// the scan to the one generation that holds it (run-time pruning in the nested loop).
CachedPlan update_found_plan(
    "UPDATE whizbang.wh_message_deduplication AS d"
    " SET observation_count = d.observation_count OPERATOR(pg_catalog.+) u.n"
    " FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4)) AS u(id, n, seen)"
    " WHERE d.consumer OPERATOR(pg_catalog.=) $1 AND d.message_id OPERATOR(pg_catalog.=) u.id"
    "  AND d.first_seen_at OPERATOR(pg_catalog.=) u.seen"
    " RETURNING d.message_id, d.fingerprint",
    {TEXTOID, UUIDARRAYOID, INT4ARRAYOID, TIMESTAMPTZARRAYOID});

CachedPlan insert_plan(
    "INSERT INTO whizbang.wh_message_deduplication (consumer, message_id, first_seen_at, observation_count, fingerprint)"
    " SELECT $1, u.id, $2, u.n, u.fp FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4),"
    "  pg_catalog.unnest($5)) AS u(id, n, fp)",
    {TEXTOID, TIMESTAMPTZOID, UUIDARRAYOID, INT4ARRAYOID, BYTEAARRAYOID});

// The SQL path on a table in generations (the native one refused: triggers, row security...):
// with no unique index across generations, stores take turns. Self-conflicting, and it
// conflicts with the ROW EXCLUSIVE of native stores; readers go on.
CachedPlan serialize_stores_plan("LOCK TABLE whizbang.wh_message_deduplication IN SHARE ROW EXCLUSIVE MODE", {});

// Whether any of the ids is on record for a snapshot taken now (execute_latest): the SQL path
// under REPEATABLE READ or SERIALIZABLE, after its lock, and the choice of a 40001's wording.
CachedPlan recorded_since_snapshot_plan(
    "SELECT d.message_id FROM whizbang.wh_message_deduplication d"
    " WHERE d.consumer OPERATOR(pg_catalog.=) $1 AND d.message_id OPERATOR(pg_catalog.=) ANY ($2) LIMIT 1",
    {TEXTOID, UUIDARRAYOID});

CachedPlan remove_plan(
    "DELETE FROM whizbang.wh_message_deduplication"
    " WHERE consumer OPERATOR(pg_catalog.=) $1 AND message_id OPERATOR(pg_catalog.=) ANY ($2)",
    {TEXTOID, UUIDARRAYOID});

}  // namespace

std::string consumer_arg(FunctionCallInfo fcinfo, int argno) {
    std::string consumer = text_arg(fcinfo, argno, "p_consumer");
    if (consumer.size() > kMaxConsumerBytes)
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                       "p_consumer is " + std::to_string(consumer.size()) + " bytes, more than the limit of " +
                           std::to_string(kMaxConsumerBytes));
    return consumer;
}

namespace {

std::optional<std::string> bytea_value(Datum d, bool isnull) {
    if (isnull) return std::nullopt;
    bytea* b = pg_call([&] { return DatumGetByteaPP(d); });
    return std::string(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
}

// Under replay_policy = reject, an element sent before now - dedup_retention_days cannot be
// deduplicated reliably any more: it is expired unless its id is still on record.
void mark_expired(std::vector<core::DedupElement>& elements, const std::vector<std::optional<TimestampTz>>& sent_at,
                  TimestampTz now) {
    bool any = std::any_of(sent_at.begin(), sent_at.end(), [](const auto& s) { return s.has_value(); });
    if (!any || setting_text("replay_policy") != "reject") return;
    TimestampTz horizon = now - static_cast<TimestampTz>(setting_int("dedup_retention_days")) * USECS_PER_DAY;
    for (std::size_t i = 0; i < elements.size(); ++i)
        elements[i].expired = sent_at[i].has_value() && *sent_at[i] < horizon;
}

// Counts a delivery of every key marked on_record (ids already recorded, and lookups) with
// one sorted upsert, filling `stored` with whether each was inserted and its fingerprint.
void upsert_on_record(Datum consumer, TimestampTz now, const std::vector<core::DedupKey>& keys,
                      const std::vector<int>& partitions, const std::vector<char>& on_record,
                      std::vector<core::StoredKey>& stored) {
    std::vector<std::size_t> which;
    for (std::size_t k = 0; k < keys.size(); ++k)
        if (on_record[k]) which.push_back(k);
    if (which.empty()) return;
    std::vector<core::Uuid> ids(which.size());
    std::vector<int> counts(which.size());
    std::vector<const std::string*> fingerprints(which.size());
    std::vector<std::optional<int>> parts(which.size());
    for (std::size_t i = 0; i < which.size(); ++i) {
        ids[i] = keys[which[i]].id;
        counts[i] = keys[which[i]].observations;
        fingerprints[i] = keys[which[i]].fingerprint;
        if (partitions[which[i]] >= 0) parts[i] = partitions[which[i]];
    }
    uint64 rows = upsert_plan.execute({consumer, TimestampTzGetDatum(now), uuid_array(ids), int4_array(counts),
                                       bytea_array(fingerprints), nullable_int4_array(parts)});
    if (rows != ids.size())
        throw SqlError(ERRCODE_INTERNAL_ERROR,
                       "dedup upsert returned " + std::to_string(rows) + " rows for " + std::to_string(ids.size()) + " ids");
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        core::Uuid id = uuid_from_datum(spi_value(r, 1, &isnull));
        auto at = std::lower_bound(ids.begin(), ids.end(), id);
        if (at == ids.end() || *at != id) throw SqlError(ERRCODE_INTERNAL_ERROR, "dedup upsert returned an unknown id");
        core::StoredKey& s = stored[which[at - ids.begin()]];
        s.inserted = DatumGetBool(spi_value(r, 2, &isnull));
        Datum fp = spi_value(r, 3, &isnull);
        s.fingerprint = bytea_value(fp, isnull);
    }
}

// Whether the record of (consumer, id) is there for a snapshot taken now: a record the native
// insertion met on the unique index but this transaction's statements cannot see was either
// committed by a concurrent transaction after this one's snapshot (REPEATABLE READ,
// SERIALIZABLE) or removed since. Asked on the way to an error only.
bool recorded_now(Datum consumer, const core::Uuid& id) {
    return recorded_since_snapshot_plan.execute_latest({consumer, uuid_array(std::vector<core::Uuid>{id})}) > 0;
}

// The 40001 of a record that is not there for this transaction, saying which of the two it was.
[[noreturn]] void record_not_visible(Datum consumer, const core::Uuid& id) {
    if (recorded_now(consumer, id))
        throw SqlError(ERRCODE_T_R_SERIALIZATION_FAILURE,
                       "could not record message id: a concurrent transaction recorded it after this transaction's "
                       "snapshot was taken",
                       "The record was committed by another transaction that this REPEATABLE READ or SERIALIZABLE "
                       "transaction cannot see, so the delivery cannot be counted as a duplicate here.",
                       "Retry the transaction: the retry answers duplicate.");
    throw SqlError(ERRCODE_T_R_SERIALIZATION_FAILURE,
                   "could not record message id: its record was removed by a concurrent transaction",
                   "Maintenance dropped or moved the record's generation while this transaction recorded it.",
                   "Retry the transaction.");
}

// upsert_on_record for a table in generations. With `locked` (the SQL path, stores take turns)
// ids not on record are inserted here; else the native insertion saw every recording id it
// left here on record, so one missing now was deleted meanwhile: the caller retries.
// found_at[k]: where the native insertion found the record of keys[k] (dedup_store.h).
void update_on_record(Datum consumer, TimestampTz now, const std::vector<core::DedupKey>& keys,
                      const std::vector<char>& on_record, const std::vector<TimestampTz>& found_at, bool locked,
                      std::vector<core::StoredKey>& stored) {
    std::vector<std::size_t> which;
    for (std::size_t k = 0; k < keys.size(); ++k)
        if (on_record[k]) which.push_back(k);
    if (which.empty()) return;
    std::vector<char> found(which.size(), 0);
    // First the ids whose generation is known, each updated in it alone; then the others
    // (lookups, the SQL path), and any record whose first_seen_at changed meanwhile, through
    // every generation.
    for (const bool known : {true, false}) {
        std::vector<std::size_t> pick;  // positions in `which`, in key order
        for (std::size_t i = 0; i < which.size(); ++i)
            if (!found[i] && (!known || found_at[which[i]] != kNotFound)) pick.push_back(i);
        if (pick.empty()) continue;
        std::vector<core::Uuid> ids(pick.size());
        std::vector<int> counts(pick.size());
        std::vector<TimestampTz> seen(pick.size());
        for (std::size_t j = 0; j < pick.size(); ++j) {
            const core::DedupKey& key = keys[which[pick[j]]];
            ids[j] = key.id;
            counts[j] = key.observations;
            seen[j] = found_at[which[pick[j]]];
        }
        uint64 rows = known ? update_found_plan.execute({consumer, uuid_array(ids), int4_array(counts),
                                                         timestamptz_array(seen)})
                            : update_plan.execute({consumer, uuid_array(ids), int4_array(counts)});
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false;
            core::Uuid id = uuid_from_datum(spi_value(r, 1, &isnull));
            auto at = std::lower_bound(ids.begin(), ids.end(), id);
            if (at == ids.end() || *at != id || found[pick[at - ids.begin()]])
                throw SqlError(ERRCODE_INTERNAL_ERROR, "dedup update returned an unknown or repeated id");
            const std::size_t i = pick[at - ids.begin()];
            found[i] = 1;
            core::StoredKey& s = stored[which[i]];
            s.inserted = false;
            Datum fp = spi_value(r, 2, &isnull);
            s.fingerprint = bytea_value(fp, isnull);
        }
    }
    std::vector<core::Uuid> new_ids;
    std::vector<int> new_counts;
    std::vector<const std::string*> new_fingerprints;
    for (std::size_t i = 0; i < which.size(); ++i) {
        if (found[i]) continue;
        const core::DedupKey& key = keys[which[i]];
        core::StoredKey& s = stored[which[i]];
        s.inserted = true;  // a lookup not on record reads as "inserted", as the upsert's; never written
        if (key.recording_element < 0) continue;
        if (!locked) record_not_visible(consumer, key.id);
        if (key.fingerprint) s.fingerprint = *key.fingerprint;
        new_ids.push_back(key.id);
        new_counts.push_back(key.observations);
        new_fingerprints.push_back(key.fingerprint);
    }
    if (!new_ids.empty() && pg_call([] { return IsolationUsesXactSnapshot(); })) {
        // The transaction's snapshot is older than the lock: a store that committed in between
        // is invisible to the UPDATE above, and its record may be in another generation, which
        // no unique index would catch. A single table's ON CONFLICT answers 40001 then; so does
        // this. Read as the owner: row security must not hide a record here.
        uint64 rows = 0;
        {
            AsExtensionOwner owner;
            rows = recorded_since_snapshot_plan.execute_latest({consumer, uuid_array(new_ids)});
        }
        if (rows > 0)
            throw SqlError(ERRCODE_T_R_SERIALIZATION_FAILURE,
                           "could not serialize access due to a concurrent insertion of a message id",
                           "A transaction that committed after this one's snapshot recorded it.",
                           "Retry the transaction.");
    }
    if (!new_ids.empty())
        insert_plan.execute(
            {consumer, TimestampTzGetDatum(now), uuid_array(new_ids), int4_array(new_counts), bytea_array(new_fingerprints)});
}

// Removes ids recorded only to look them up, and fixes counters the upsert could not know.
void apply_resolution(Datum consumer, const core::DedupResolution& resolution) {
    if (!resolution.remove.empty()) remove_plan.execute({consumer, uuid_array(resolution.remove)});
    if (resolution.adjustments.empty()) return;
    std::vector<core::Uuid> ids;
    std::vector<int> observations, conflicts;
    for (const auto& a : resolution.adjustments) {
        ids.push_back(a.id);
        observations.push_back(a.observations);
        conflicts.push_back(a.conflicts);
    }
    adjust_plan.execute({consumer, uuid_array(ids), int4_array(observations), int4_array(conflicts)});
}

}  // namespace

std::vector<core::DedupOutcome> record_deliveries(const char* function_name, const std::string& consumer,
                                                  std::vector<core::DedupElement>& elements,
                                                  const std::vector<std::optional<TimestampTz>>& sent_at,
                                                  TimestampTz now, PartitionOfId partition) {
    SpiConnection spi;
    mark_expired(elements, sent_at, now);
    const bool generations = dedup_in_generations();
    // A p_now whose generation lies outside the window records nothing (generation_span.h):
    // every delivery is looked up, as one sent before the replay horizon; an id on record is
    // still a duplicate or a conflict. It makes no generation.
    const bool outside_window = generations && !generation_for_store(now);
    if (outside_window)
        for (core::DedupElement& e : elements) e.expired = true;
    core::DedupPlan plan(elements);
    const auto& keys = plan.keys();
    std::vector<core::StoredKey> stored(keys.size());
    // The distribution column of each key: set inside a routed call only (docs/scaleout.md).
    if (!partition && in_shard_scope())
        partition = [](const core::Uuid& id) -> std::optional<int> {
            return core::partition_of(id, kDistributedPartitionCount);
        };
    std::vector<int> partitions(keys.size(), -1);
    if (partition)
        for (std::size_t k = 0; k < keys.size(); ++k) partitions[k] = partition(keys[k].id).value_or(-1);

    // New ids are inserted natively; ids on record (and lookups) go through the upsert,
    // which counts the observation and returns the stored fingerprint.
    std::vector<char> on_record(keys.size(), 1);
    std::vector<TimestampTz> found_at(keys.size(), kNotFound);
    // Outside the window every key is a lookup: the UPDATE below finds the ids on record.
    NativeInsert native = outside_window
                              ? NativeInsert::done
                              : insert_new_keys(function_name, consumer, now, keys, partitions, on_record, found_at);
    if (native == NativeInsert::no_generation)
        throw SqlError(ERRCODE_T_R_SERIALIZATION_FAILURE,
                       "could not record message ids: the dedup generation of p_now was dropped meanwhile",
                       "p_now lies outside the retention window and maintenance dropped its generation.",
                       "Retry the transaction, or store with a p_now inside the retention window.");
    if (native == NativeInsert::target_sealed)
        throw SqlError(ERRCODE_T_R_SERIALIZATION_FAILURE,
                       "could not record message ids: the dedup generation of p_now was sealed meanwhile",
                       "Maintenance sealed the generation between the store's look at it and its insertion.",
                       "Retry the transaction: the store then unseals the generation before it writes.");
    if (native == NativeInsert::done) {
        for (std::size_t k = 0; k < keys.size(); ++k) {
            if (on_record[k]) continue;
            stored[k].inserted = true;
            if (keys[k].fingerprint) stored[k].fingerprint = *keys[k].fingerprint;
        }
    }
    Datum consumer_datum = pg_call([&] {
        return PointerGetDatum(cstring_to_text_with_len(consumer.data(), static_cast<int>(consumer.size())));
    });
    if (generations) {
        if (native == NativeInsert::refused) serialize_stores_plan.execute({});
        update_on_record(consumer_datum, now, keys, on_record, found_at, native == NativeInsert::refused, stored);
    } else {
        upsert_on_record(consumer_datum, now, keys, partitions, on_record, stored);
    }

    core::DedupResolution resolution = plan.resolve(stored);
    // In generations a lookup is never written, so there is nothing to remove.
    if (generations) resolution.remove.clear();
    apply_resolution(consumer_datum, resolution);
    spi.finish();
    return std::move(resolution.outcomes);
}

namespace {

Datum outcome_text(core::DedupOutcome o) {
    return pg_call([&] { return CStringGetTextDatum(core::outcome_word(o)); });
}

// dedup_insert_many on a distributed install (docs/scaleout.md): a record lives in its id's
// partition, so each shard's ids go, in input order, to the node that holds the shard, in one
// routed call; the outcomes come back one per id, in the same order. Returns them as text.
std::vector<Datum> route_dedup(const std::vector<core::Uuid>& ids, const std::string& consumer,
                               const std::optional<std::vector<std::optional<std::string>>>& fingerprints,
                               const std::optional<std::vector<std::optional<TimestampTz>>>& sent_at,
                               TimestampTz now) {
    SpiConnection spi;
    std::vector<int> partitions(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) partitions[i] = core::partition_of(ids[i], kDistributedPartitionCount);
    std::vector<Datum> outcomes(ids.size(), (Datum)0);
    const Datum consumer_datum = text_datum(consumer);
    for (const auto& [shard, positions] : routing_groups(partitions)) {
        std::vector<core::Uuid> part_ids;
        std::vector<const std::string*> part_fingerprints;
        std::vector<std::optional<TimestampTz>> part_sent_at;
        for (std::size_t i : positions) {
            part_ids.push_back(ids[i]);
            if (fingerprints) part_fingerprints.push_back((*fingerprints)[i] ? &*(*fingerprints)[i] : nullptr);
            if (sent_at) part_sent_at.push_back((*sent_at)[i]);
        }
        std::vector<Datum> values{uuid_array(part_ids), consumer_datum,
                                  fingerprints ? bytea_array(part_fingerprints) : (Datum)0,
                                  sent_at ? optional_timestamptz_array(part_sent_at) : (Datum)0,
                                  TimestampTzGetDatum(now)};
        std::vector<char> nulls{' ', ' ', fingerprints ? ' ' : 'n', sent_at ? ' ' : 'n', ' '};
        uint64 rows = routed_call(partitions[positions.front()], "dedup_insert_many",
                                  {UUIDARRAYOID, TEXTOID, BYTEAARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZOID}, values,
                                  nulls);
        if (rows != positions.size())
            throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                           "whizbang: shard " + std::to_string(shard) + " answered " + std::to_string(rows) +
                               " outcomes for " + std::to_string(positions.size()) + " ids",
                           "Nothing of the call was written.", "whizbang.check() reports the routing state.");
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false;
            Datum word = spi_value(r, 2, &isnull);
            // Copied out of SPI's memory before the next call (and SPI_finish) frees it.
            outcomes[positions[r]] = pg_call([&] { return SPI_datumTransfer(word, false, -1); });
        }
    }
    spi.finish();
    return outcomes;
}

}  // namespace
}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// dedup_insert(p_message_id, p_consumer, p_fingerprint, p_sent_at, p_now) RETURNS text
WB_ROUTED_FUNCTION(wb_dedup_insert, by_message) {
    require_not_null(fcinfo, 0, "p_message_id");
    std::string consumer = consumer_arg(fcinfo, 1);
    TimestampTz now = timestamptz_arg(fcinfo, 4, "p_now");
    CallShape shape;
    shape.sent_at = !PG_ARGISNULL(3);
    require_privileges("dedup_insert", shape);
    if (must_route()) {
        std::optional<std::vector<std::optional<std::string>>> fingerprint;
        std::optional<std::vector<std::optional<TimestampTz>>> sent;
        if (!PG_ARGISNULL(2)) {
            bytea* fp = pg_call([&] { return PG_GETARG_BYTEA_PP(2); });
            fingerprint.emplace(1, std::string(VARDATA_ANY(fp), VARSIZE_ANY_EXHDR(fp)));
        }
        if (!PG_ARGISNULL(3)) sent.emplace(1, PG_GETARG_TIMESTAMPTZ(3));
        return route_dedup({uuid_from_datum(PG_GETARG_DATUM(0))}, consumer, fingerprint, sent, now)[0];
    }

    std::vector<core::DedupElement> elements(1);
    elements[0].id = uuid_from_datum(PG_GETARG_DATUM(0));
    if (!PG_ARGISNULL(2)) {
        bytea* fp = pg_call([&] { return PG_GETARG_BYTEA_PP(2); });
        elements[0].fingerprint.emplace(VARDATA_ANY(fp), VARSIZE_ANY_EXHDR(fp));
    }
    std::vector<std::optional<TimestampTz>> sent_at(1);
    if (!PG_ARGISNULL(3)) sent_at[0] = PG_GETARG_TIMESTAMPTZ(3);

    auto outcomes = record_deliveries("dedup_insert", consumer, elements, sent_at, now);
    return outcome_text(outcomes[0]);
}

// dedup_insert_many(p_message_ids, p_consumer, p_fingerprints, p_sent_at, p_now)
//   RETURNS TABLE(message_id uuid, outcome text), one row per input in input order
WB_ROUTED_FUNCTION(wb_dedup_insert_many, by_message) {
    std::vector<core::Uuid> ids = *uuid_array_arg(fcinfo, 0, "p_message_ids", true);
    std::string consumer = consumer_arg(fcinfo, 1);
    auto fingerprints = bytea_array_arg(fcinfo, 2, "p_fingerprints");
    auto sent_at = timestamptz_array_arg(fcinfo, 3, "p_sent_at");
    TimestampTz now = timestamptz_arg(fcinfo, 4, "p_now");
    if (fingerprints) require_same_length(ids.size(), "p_message_ids", fingerprints->size(), "p_fingerprints");
    if (sent_at) require_same_length(ids.size(), "p_message_ids", sent_at->size(), "p_sent_at");

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (ids.empty()) return (Datum)0;
    CallShape shape;
    shape.sent_at = sent_at.has_value();
    require_privileges("dedup_insert_many", shape);
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);

    if (must_route()) {
        std::vector<Datum> routed = route_dedup(ids, consumer, fingerprints, sent_at, now);
        pg_call([&] {
            for (std::size_t i = 0; i < ids.size(); ++i) {
                Datum values[2] = {PointerGetDatum(ids[i].data()), routed[i]};
                bool nulls[2] = {false, false};
                tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
            }
        });
        return (Datum)0;
    }

    std::vector<core::DedupElement> elements(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        elements[i].id = ids[i];
        if (fingerprints) elements[i].fingerprint = std::move((*fingerprints)[i]);
    }
    if (!sent_at) sent_at.emplace(ids.size());

    auto outcomes = record_deliveries("dedup_insert_many", consumer, elements, *sent_at, now);

    Datum words[4] = {outcome_text(core::DedupOutcome::fresh), outcome_text(core::DedupOutcome::duplicate),
                      outcome_text(core::DedupOutcome::conflict), outcome_text(core::DedupOutcome::expired)};
    pg_call([&] {
        for (std::size_t i = 0; i < ids.size(); ++i) {
            Datum values[2] = {PointerGetDatum(ids[i].data()), words[static_cast<int>(outcomes[i])]};
            bool nulls[2] = {false, false};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
            if ((i & 4095) == 0) CHECK_FOR_INTERRUPTS();
        }
    });
    return (Datum)0;
}
