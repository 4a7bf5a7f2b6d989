// Sealing dedup generations and their membership filters (dedup_filters.h has the protocol).
#include <cstring>
#include <string>

#include "pg/store/dedup_filters.h"

#include "core/membership_filter.h"
#include "pg/boundary/owner.h"
#include "pg/boundary/spi.h"
#include "pg/boundary/statement_settings.h"
#include "pg/boundary/subtransaction.h"
#include "pg/citus/shard_scope.h"
#include "pg/store/generations.h"

namespace whizbang::pg {
namespace {

namespace filter = core::filter;

constexpr const char* kRefuseFunction = "_refuse_sealed_write";

// The filters loaded by this backend, in TopMemoryContext (plain data: the cache is read on the
// PostgreSQL side of the boundary). A seal is named by its trigger's oid, so a generation
// unsealed and sealed again is loaded again; entries of dropped generations are simply never
// asked for again, and the cache is emptied when it fills.
constexpr int kCachedFilters = 128;
LoadedFilter cached[kCachedFilters];
int cached_count = 0;

void forget_cached() {
    for (int i = 0; i < cached_count; ++i)
        if (cached[i].words != nullptr) pfree(cached[i].words);
    cached_count = 0;
}

// The stored filter of `relid`, read with a snapshot taken now; nullptr words when none (or one
// that does not fit this library's hashing: then the generation is looked up as unfiltered).
LoadedFilter load(Oid relid, Oid seal) {
    LoadedFilter loaded{relid, seal, 0, nullptr};
    const Oid table = whizbang_relid_unguarded(kFilterTable);
    if (!OidIsValid(table)) return loaded;  // a library newer than the installed version
    Relation rel = table_open(table, AccessShareLock);
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    TableScanDesc scan = table_beginscan(rel, snapshot, 0, nullptr);
    TupleDesc desc = RelationGetDescr(rel);
    HeapTuple tuple;
    // Columns: generation, key_count, bit_count, hash_count, bits, sealed_at.
    while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
        bool isnull = false;
        if (DatumGetObjectId(heap_getattr(tuple, 1, desc, &isnull)) != relid || isnull) continue;
        const int64 bits = DatumGetInt64(heap_getattr(tuple, 3, desc, &isnull));
        if (isnull || bits <= 0) break;
        const int32 hashes = DatumGetInt32(heap_getattr(tuple, 4, desc, &isnull));
        if (isnull || hashes != filter::kHashes) break;
        Datum raw = heap_getattr(tuple, 5, desc, &isnull);
        if (isnull) break;
        bytea* value = DatumGetByteaPP(raw);
        const std::size_t words = filter::words_for(static_cast<std::uint64_t>(bits));
        if (VARSIZE_ANY_EXHDR(value) != words * sizeof(std::uint64_t)) break;
        loaded.words = static_cast<std::uint64_t*>(MemoryContextAllocHuge(TopMemoryContext, words * sizeof(std::uint64_t)));
        memcpy(loaded.words, VARDATA_ANY(value), words * sizeof(std::uint64_t));
        loaded.bits = static_cast<std::uint64_t>(bits);
        break;
    }
    table_endscan(scan);
    UnregisterSnapshot(snapshot);
    table_close(rel, AccessShareLock);
    return loaded;
}

std::string quoted_generation(Oid relid) {
    const char* quoted = pg_call([&] {
        const char* name = get_rel_name(relid);
        if (name == nullptr)
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("whizbang: a dedup generation vanished")));
        return quote_identifier(name);
    });
    return std::string("whizbang.") + quoted;
}

// The keys of a generation, hashed, in a palloc'd (huge) array; read with a snapshot taken now,
// under the caller's SHARE ROW EXCLUSIVE lock: every writer has ended, so every record is seen.
// Returns the filter as a bytea of its words and the number of keys.
bytea* build_filter(Oid relid, int64* keys_out, int64* bits_out) {
    Relation rel = table_open(relid, NoLock);  // locked by the caller
    TupleDesc desc = RelationGetDescr(rel);
    AttrNumber id_att = InvalidAttrNumber, consumer_att = InvalidAttrNumber;
    for (int i = 0; i < desc->natts; ++i) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (att->attisdropped) continue;
        if (strcmp(NameStr(att->attname), "message_id") == 0) id_att = att->attnum;
        if (strcmp(NameStr(att->attname), "consumer") == 0) consumer_att = att->attnum;
    }
    if (id_att == InvalidAttrNumber || consumer_att == InvalidAttrNumber)
        elog(ERROR, "whizbang: a dedup generation lacks message_id or consumer");
    Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
    TableScanDesc scan = table_beginscan(rel, snapshot, 0, nullptr);
    std::size_t capacity = 1024, count = 0;
    filter::KeyHash* hashes = static_cast<filter::KeyHash*>(palloc(capacity * sizeof(filter::KeyHash)));
    HeapTuple tuple;
    while ((tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr) {
        if ((count & 4095) == 0) CHECK_FOR_INTERRUPTS();
        bool id_null = false, consumer_null = false;
        Datum id = heap_getattr(tuple, id_att, desc, &id_null);
        Datum consumer = heap_getattr(tuple, consumer_att, desc, &consumer_null);
        if (id_null || consumer_null) continue;  // NOT NULL columns: never
        text* c = DatumGetTextPP(consumer);
        if (count == capacity) {
            capacity *= 2;
            hashes = static_cast<filter::KeyHash*>(repalloc_huge(hashes, capacity * sizeof(filter::KeyHash)));
        }
        hashes[count++] = filter::key_hash(DatumGetUUIDP(id)->data,
                                           std::string_view(VARDATA_ANY(c), VARSIZE_ANY_EXHDR(c)));
    }
    table_endscan(scan);
    UnregisterSnapshot(snapshot);
    table_close(rel, NoLock);
    const std::uint64_t bits = filter::bits_for(count);
    const std::size_t words = filter::words_for(bits);
    std::uint64_t* w = static_cast<std::uint64_t*>(palloc_extended(words * sizeof(std::uint64_t), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO));
    for (std::size_t i = 0; i < count; ++i) filter::add(w, bits, hashes[i]);
    pfree(hashes);
    bytea* value = static_cast<bytea*>(palloc_extended(VARHDRSZ + words * sizeof(std::uint64_t), MCXT_ALLOC_HUGE));
    SET_VARSIZE(value, VARHDRSZ + words * sizeof(std::uint64_t));
    memcpy(VARDATA(value), w, words * sizeof(std::uint64_t));
    pfree(w);
    *keys_out = static_cast<int64>(count);
    *bits_out = static_cast<int64>(bits);
    return value;
}

// Seals one generation; false when it was sealed meanwhile. The caller runs as the owner.
bool seal_one(Oid relid, int lock_timeout_ms) {
    const std::string name = quoted_generation(relid);
    // Waits for every transaction that wrote into the generation, holds off new writers; the
    // stores' probes (ACCESS SHARE) go on.
    lock_table(name, "SHARE ROW EXCLUSIVE", lock_timeout_ms);
    if (generation_sealed(relid)) return false;
    int64 keys = 0, bits = 0;
    bytea* value = pg_call([&] { return build_filter(relid, &keys, &bits); });
    pg_call([&] {
        Oid types[5] = {OIDOID, INT8OID, INT8OID, INT4OID, BYTEAOID};
        Datum values[5] = {ObjectIdGetDatum(relid), Int64GetDatum(keys), Int64GetDatum(bits),
                           Int32GetDatum(filter::kHashes), PointerGetDatum(value)};
        int rc = SPI_execute_with_args(
            "INSERT INTO whizbang.wh_dedup_filters (generation, key_count, bit_count, hash_count, bits)"
            " VALUES ($1::pg_catalog.regclass, $2, $3, $4, $5)"
            " ON CONFLICT (generation) DO UPDATE SET key_count = excluded.key_count, bit_count = excluded.bit_count,"
            "   hash_count = excluded.hash_count, bits = excluded.bits, sealed_at = pg_catalog.now()",
            5, types, values, nullptr, false, 0);
        if (rc < 0) elog(ERROR, "whizbang: SPI_execute_with_args failed (%d) storing a dedup filter", rc);
        pfree(value);
    });
    // ENABLE ALWAYS: fires under session_replication_role = replica too (a logical replica's
    // apply, pg_restore --disable-triggers does not drop it either).
    run_sql("CREATE TRIGGER " + std::string(kSealTrigger) + " BEFORE INSERT OR UPDATE OF message_id, consumer ON " +
            name + " FOR EACH ROW EXECUTE FUNCTION whizbang." + kRefuseFunction + "()");
    run_sql("ALTER TABLE " + name + " ENABLE ALWAYS TRIGGER " + kSealTrigger);
    return true;
}

}  // namespace

GenerationTriggers generation_triggers(Relation generation, Oid* seal) {
    TriggerDesc* triggers = generation->trigdesc;
    if (triggers == nullptr || triggers->numtriggers == 0) return GenerationTriggers::none;
    if (triggers->numtriggers != 1) return GenerationTriggers::other;
    const Trigger& t = triggers->triggers[0];
    if (strcmp(t.tgname, kSealTrigger) != 0 || t.tgenabled != TRIGGER_FIRES_ALWAYS) return GenerationTriggers::other;
    // Ours only when it calls whizbang's refusal: a user's trigger of that name is a trigger.
    const char* function = get_func_name(t.tgfoid);
    if (function == nullptr || strcmp(function, kRefuseFunction) != 0 ||
        get_func_namespace(t.tgfoid) != get_namespace_oid("whizbang", false))
        return GenerationTriggers::other;
    *seal = t.tgoid;
    return GenerationTriggers::sealed;
}

const LoadedFilter* sealed_filter(Oid relid, Oid seal) {
    for (int i = 0; i < cached_count; ++i)
        if (cached[i].relid == relid && cached[i].seal == seal) return cached[i].words != nullptr ? &cached[i] : nullptr;
    if (cached_count == kCachedFilters) forget_cached();
    cached[cached_count] = load(relid, seal);
    const LoadedFilter* loaded = &cached[cached_count++];
    return loaded->words != nullptr ? loaded : nullptr;
}

bool generation_sealed(Oid relid) {
    return pg_call([&] {
        // A catalog snapshot taken after the invalidations so far: a seal or unseal committed
        // before this call is seen (the caller's transaction snapshot may be older).
        AcceptInvalidationMessages();
        Relation triggers = table_open(TriggerRelationId, AccessShareLock);
        ScanKeyData key[2];
        ScanKeyInit(&key[0], Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
        ScanKeyInit(&key[1], Anum_pg_trigger_tgname, BTEqualStrategyNumber, F_NAMEEQ, CStringGetDatum(kSealTrigger));
        SysScanDesc scan = systable_beginscan(triggers, TriggerRelidNameIndexId, true, nullptr, 2, key);
        const bool found = HeapTupleIsValid(systable_getnext(scan));
        systable_endscan(scan);
        table_close(triggers, AccessShareLock);
        return found;
    });
}

// A database whose whizbang predates 0.14.0 (the new library, ALTER EXTENSION UPDATE not run
// yet) has no table for the filters, and none of its generations is sealed.
static bool filters_table() { return whizbang_table_exists("wh_dedup_filters"); }

int seal_generations(TimestampTz now, TimestampTz horizon, int lock_timeout_ms) {
    // Before 0.14.0's update its generations stay unsealed, as before.
    if (!filters_table()) return 0;
    int sealed = 0;
    SpiConnection spi;
    AsExtensionOwner owner;
    for (const GenerationBound& g : list_generations()) {
        // Its span over (no store with a current p_now records into it) and still in the window
        // (one that leaves it is dropped, not sealed).
        if (g.end > now || g.end <= horizon || generation_sealed(g.relid)) continue;
        bool done = false;
        const std::string timeout = std::to_string(lock_timeout_ms);
        // A subtransaction each: a lock not granted in time leaves that one for the next run.
        in_subtransaction(
            [&] {
                if (lock_timeout_ms > 0)
                    with_settings({{"lock_timeout", timeout.c_str()}}, [&] { done = seal_one(g.relid, lock_timeout_ms); });
                else
                    done = seal_one(g.relid, 0);
            },
            [](int code) { return code == ERRCODE_LOCK_NOT_AVAILABLE; });
        sealed += done ? 1 : 0;
    }
    spi.finish();
    return sealed;
}

bool unseal_generation(Oid relid, int lock_timeout_ms) {
    if (!generation_sealed(relid)) return false;
    SpiConnection spi;
    AsExtensionOwner owner;
    const std::string name = quoted_generation(relid);
    // Waits for every store that holds the generation open (and may have skipped it by its
    // filter), holds the next ones off until this transaction ends: they then see it unsealed.
    lock_table(name, "ACCESS EXCLUSIVE", lock_timeout_ms);
    if (!generation_sealed(relid)) {
        spi.finish();
        return false;
    }
    run_sql("DROP TRIGGER " + std::string(kSealTrigger) + " ON " + name);
    forget_filter(relid);
    spi.finish();
    return true;
}

void forget_filter(Oid relid) {
    if (!filters_table()) return;
    pg_call([&] {
        Oid types[1] = {OIDOID};
        Datum values[1] = {ObjectIdGetDatum(relid)};
        int rc = SPI_execute_with_args(
            "DELETE FROM whizbang.wh_dedup_filters WHERE generation OPERATOR(pg_catalog.=) $1::pg_catalog.regclass", 1,
            types, values, nullptr, false, 0);
        if (rc < 0) elog(ERROR, "whizbang: SPI_execute_with_args failed (%d) removing a dedup filter", rc);
    });
}

}  // namespace whizbang::pg
