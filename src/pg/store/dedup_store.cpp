// Native insertion into wh_message_deduplication.
//
// The executor's INSERT ... ON CONFLICT probes the unique index before inserting, so a new
// key costs two descents of the primary key. Dedup batches are mostly new ids, so this path
// inserts speculatively and lets the unique check of the insertion itself detect a conflict
// (UNIQUE_CHECK_PARTIAL); only then does it look at the conflicting row, abort its own
// speculative tuple and either wait for the other inserter or report the key as on record.
// Keys are handled in sorted order, so concurrent batches wait for each other at most.
//
// A batch whose first key is absent tries the plain insertion first (insert_plainly, issue 31):
// ordinary tuples in a subtransaction, no speculative insertion and so no XLOG_HEAP_CONFIRM
// (48 bytes per new id); at the first sign of another record of a key the subtransaction is
// rolled back and the batch goes the speculative way below, which waits where needed.
//
// A table in generations (0.12.0, generations.h) adds the guard of core/generation_guard.h:
// the record goes to the generation of its first_seen_at, and the other generations are
// probed around the insertion, so that one key is never new in two generations. A sealed
// generation (0.14.0, dedup_filters.h) is probed only when its membership filter says the key
// may be in it: a new id then costs one look-up, in the generations still open.
#include <cstring>

#include "pg/store/dedup_store.h"

#include "storage/proc.h"
#include "utils/resowner.h"

#include "core/generation_guard.h"
#include "core/membership_filter.h"
#include "pg/citus/shard_scope.h"
#include "pg/store/dedup_filters.h"
#include "pg/store/generations.h"


namespace whizbang::pg {
namespace {

constexpr int kMaxConflictRetries = 10000;

// Redeliveries often arrive as whole batches, where inserting first and aborting costs more
// than looking first. So a batch looks first at its first id, and then whenever most ids so
// far were on record; after a new id it inserts first (one descent per new id).
bool look_first(std::size_t seen, std::size_t seen_on_record) {
    return seen == 0 || seen_on_record * 2 > seen;
}

struct Columns {
    AttrNumber consumer = 0, message_id = 0, first_seen_at = 0, observation_count = 0, conflict_count = 0,
               fingerprint = 0, partition_number = 0;  // partition_number: 0.8.0 on
};

Columns find_columns(TupleDesc desc) {
    Columns c;
    for (int i = 0; i < desc->natts; ++i) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (att->attisdropped) continue;
        const char* name = NameStr(att->attname);
        AttrNumber n = att->attnum;
        if (strcmp(name, "consumer") == 0) c.consumer = n;
        else if (strcmp(name, "message_id") == 0) c.message_id = n;
        else if (strcmp(name, "first_seen_at") == 0) c.first_seen_at = n;
        else if (strcmp(name, "observation_count") == 0) c.observation_count = n;
        else if (strcmp(name, "conflict_count") == 0) c.conflict_count = n;
        else if (strcmp(name, "fingerprint") == 0) c.fingerprint = n;
        else if (strcmp(name, "partition_number") == 0) c.partition_number = n;
    }
    if (!c.consumer || !c.message_id || !c.first_seen_at || !c.observation_count || !c.conflict_count || !c.fingerprint)
        elog(ERROR, "whizbang.wh_message_deduplication lacks a column whizbang needs");
    return c;
}

// The one unique index the native path supports: the primary key. NULL when the table
// has another unique index (then a conflict could not be attributed) or none.
Relation primary_key_only(ResultRelInfo* rri) {
    Relation pk = nullptr;
    for (int i = 0; i < rri->ri_NumIndices; ++i) {
        Relation index = rri->ri_IndexRelationDescs[i];
        if (!index->rd_index->indisunique) continue;
        if (!index->rd_index->indisprimary || pk != nullptr) return nullptr;
        pk = index;
    }
    return pk;
}

enum class Holder { none, live, in_progress };

// Looks the key of `slot` up in the primary key with a dirty snapshot, as the executor's
// unique check does: sees committed rows and rows of transactions still in progress.
Holder find_holder(Relation heap, Relation pk, TupleTableSlot* slot, TupleTableSlot* found, TransactionId* wait_xid,
                   uint32* wait_token) {
    int nkeys = IndexRelationGetNumberOfKeyAttributes(pk);
    ScanKeyData keys[INDEX_MAX_KEYS];
    for (int i = 0; i < nkeys; ++i) {
        AttrNumber heap_att = pk->rd_index->indkey.values[i];
        Oid eq = get_opfamily_member(pk->rd_opfamily[i], pk->rd_opcintype[i], pk->rd_opcintype[i], BTEqualStrategyNumber);
        ScanKeyEntryInitialize(&keys[i], 0, i + 1, BTEqualStrategyNumber, InvalidOid, pk->rd_indcollation[i],
                               get_opcode(eq), slot->tts_values[heap_att - 1]);
    }
    SnapshotData dirty;
    InitDirtySnapshot(dirty);
    IndexScanDesc scan = compat::index_beginscan(heap, pk, &dirty, nkeys, 0);
    index_rescan(scan, keys, nkeys, nullptr, 0);
    Holder holder = Holder::none;
    while (index_getnext_slot(scan, ForwardScanDirection, found)) {
        TransactionId xid = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
        if (TransactionIdIsValid(xid)) {
            *wait_xid = xid;
            *wait_token = dirty.speculativeToken;
            holder = Holder::in_progress;
        } else {
            holder = Holder::live;
        }
        break;
    }
    index_endscan(scan);
    return holder;
}


// A new record of `key` in `slot` (laid out as `desc`); partition < 0: partition_number NULL.
void fill_slot(TupleTableSlot* slot, TupleDesc desc, const Columns& col, Datum consumer, const core::DedupKey& key,
               TimestampTz now, int partition) {
    ExecClearTuple(slot);
    for (int i = 0; i < desc->natts; ++i) slot->tts_isnull[i] = true;
    slot->tts_values[col.consumer - 1] = consumer;
    slot->tts_values[col.message_id - 1] = PointerGetDatum(key.id.data());
    slot->tts_values[col.first_seen_at - 1] = TimestampTzGetDatum(now);
    slot->tts_values[col.observation_count - 1] = Int32GetDatum(key.observations);
    slot->tts_values[col.conflict_count - 1] = Int32GetDatum(0);
    for (AttrNumber a : {col.consumer, col.message_id, col.first_seen_at, col.observation_count, col.conflict_count})
        slot->tts_isnull[a - 1] = false;
    if (col.partition_number && partition >= 0) {
        slot->tts_values[col.partition_number - 1] = Int32GetDatum(partition);
        slot->tts_isnull[col.partition_number - 1] = false;
    }
    if (key.fingerprint != nullptr) {
        bytea* fp = static_cast<bytea*>(palloc(VARHDRSZ + key.fingerprint->size()));
        SET_VARSIZE(fp, VARHDRSZ + key.fingerprint->size());
        memcpy(VARDATA(fp), key.fingerprint->data(), key.fingerprint->size());
        slot->tts_values[col.fingerprint - 1] = PointerGetDatum(fp);
        slot->tts_isnull[col.fingerprint - 1] = false;
    }
    ExecStoreVirtualTuple(slot);
}

// One generation as the guard sees it: its heap, its primary key and an open index scan with
// a dirty snapshot of its own, rescanned per key.
struct GenerationProbe {
    Relation heap;
    Relation pk;
    IndexScanDesc scan;
    SnapshotData dirty;
    TupleTableSlot* found;
    bool key_is_consumer[2];  // which primary key column holds consumer (else message_id)
    RegProcedure eq[2];
    Oid collation[2];
    AttrNumber first_seen_at;
    bool sealed;                 // carries the seal (dedup_filters.h): no record enters it
    const LoadedFilter* filter;  // its membership filter; nullptr: probe the index
};

namespace guard = core::generations;

// Prepares the probe of one generation; false when its primary key is not exactly
// (message_id, consumer) or it has another unique index (the SQL path then handles the batch).
bool open_probe(GenerationProbe* g, Oid relid, LOCKMODE mode) {
    g->heap = table_open(relid, mode);
    g->pk = nullptr;
    List* indexes = RelationGetIndexList(g->heap);
    ListCell* lc;
    bool ok = true;
    foreach (lc, indexes) {
        Relation index = index_open(lfirst_oid(lc), AccessShareLock);
        if (index->rd_index->indisprimary && g->pk == nullptr) {
            g->pk = index;
            continue;
        }
        if (index->rd_index->indisunique) ok = false;
        index_close(index, AccessShareLock);
    }
    list_free(indexes);
    if (g->pk == nullptr || IndexRelationGetNumberOfKeyAttributes(g->pk) != 2) ok = false;
    // The seal's trigger is whizbang's own: sealed generations are read natively, written never
    // (a store whose p_now falls into one unseals it first, generations.cpp). Any other trigger
    // needs the executor.
    Oid seal = InvalidOid;
    const GenerationTriggers triggers = generation_triggers(g->heap, &seal);
    if (triggers == GenerationTriggers::other) ok = false;
    if (!ok) return false;
    g->sealed = triggers == GenerationTriggers::sealed;
    g->filter = g->sealed ? sealed_filter(relid, seal) : nullptr;
    TupleDesc desc = RelationGetDescr(g->heap);
    for (int i = 0; i < 2; ++i) {
        AttrNumber att = g->pk->rd_index->indkey.values[i];
        const char* name = att > 0 ? NameStr(TupleDescAttr(desc, att - 1)->attname) : "";
        if (strcmp(name, "consumer") != 0 && strcmp(name, "message_id") != 0) return false;
        g->key_is_consumer[i] = strcmp(name, "consumer") == 0;
        Oid op = get_opfamily_member(g->pk->rd_opfamily[i], g->pk->rd_opcintype[i], g->pk->rd_opcintype[i],
                                     BTEqualStrategyNumber);
        g->eq[i] = get_opcode(op);
        g->collation[i] = g->pk->rd_indcollation[i];
    }
    if (g->key_is_consumer[0] == g->key_is_consumer[1]) return false;
    g->first_seen_at = find_columns(desc).first_seen_at;
    InitDirtySnapshot(g->dirty);
    g->scan = compat::index_beginscan(g->heap, g->pk, &g->dirty, 2, 0);
    g->found = table_slot_create(g->heap, nullptr);
    return true;
}

void close_probe(GenerationProbe* g, bool keep_lock) {
    if (g->found != nullptr) ExecDropSingleTupleTableSlot(g->found);
    if (g->scan != nullptr) index_endscan(g->scan);
    if (g->pk != nullptr) index_close(g->pk, AccessShareLock);
    table_close(g->heap, keep_lock ? NoLock : AccessShareLock);
}

// The key's record in one generation, seen with a dirty snapshot (committed rows, rows of
// transactions in progress, our own rows).
guard::Sighting probe(GenerationProbe* g, Datum message_id, Datum consumer) {
    ScanKeyData keys[2];
    for (int i = 0; i < 2; ++i)
        ScanKeyEntryInitialize(&keys[i], 0, i + 1, BTEqualStrategyNumber, InvalidOid, g->collation[i], g->eq[i],
                               g->key_is_consumer[i] ? consumer : message_id);
    index_rescan(g->scan, keys, 2, nullptr, 0);
    guard::Sighting seen;
    if (index_getnext_slot(g->scan, ForwardScanDirection, g->found)) {
        if (TransactionIdIsValid(g->dirty.xmin)) {
            seen.found = g->dirty.speculativeToken != 0 ? guard::Found::inserting : guard::Found::inserted;
            seen.xid = g->dirty.xmin;
        } else if (TransactionIdIsValid(g->dirty.xmax)) {
            seen.found = guard::Found::inserted;  // being deleted (moved forward) by an open transaction
            seen.xid = g->dirty.xmax;
        } else {
            seen.found = guard::Found::live;
        }
    }
    return seen;
}

// The text of a consumer Datum (a text value made from a std::string, never toasted).
std::string_view consumer_text(Datum consumer) {
    text* t = reinterpret_cast<text*>(DatumGetPointer(consumer));
    return std::string_view(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

// The first record of the key in the generations, `hint` first, then newest first, skipping
// `skip`; *at: where. Any order is safe: every sighting is acted on by the guard's rules, and a
// wait is followed by a new look (core/generation_guard.h). The hint is where the batch's last
// id on record was found: redeliveries tend to come from one period. A sealed generation whose
// filter says the key is absent is not probed: it holds no record in progress (no writer enters
// it) and none of the key committed (the filter has every key it holds), so the probe would see
// nothing.
guard::Sighting look(GenerationProbe* gens, int n, int skip, int hint, Datum message_id, Datum consumer,
                     const core::filter::KeyHash& hash, int* at) {
    for (int step = -1; step < n; ++step) {
        const int i = step < 0 ? hint : n - 1 - step;
        if (i < 0 || i == skip || (step >= 0 && i == hint)) continue;
        const LoadedFilter* f = gens[i].filter;
        if (f != nullptr && !core::filter::may_contain(f->words, f->bits, hash)) continue;
        guard::Sighting seen = probe(&gens[i], message_id, consumer);
        if (seen.found != guard::Found::none) {
            *at = i;
            return seen;
        }
    }
    *at = -1;
    return guard::Sighting{};
}

void wait_for(const guard::Sighting& seen, uint32 token, GenerationProbe* where) {
    if (seen.found == guard::Found::inserting && token != 0)
        SpeculativeInsertionWait(seen.xid, token);
    else
        XactLockTableWait(seen.xid, where->heap, &where->found->tts_tid, XLTW_InsertIndex);
}

bool same_generations(const GenerationBound* a, int n, const GenerationBound* b, int m) {
    if (n != m) return false;
    for (int i = 0; i < n; ++i)
        if (a[i].relid != b[i].relid || a[i].start != b[i].start || a[i].end != b[i].end) return false;
    return true;
}

// Whether the native insertion can serve the generations in `gens` (opened by open_probe) with
// `target` the generation of the records: beyond open_probe's checks, what the executor would
// enforce on an inserted row (CHECK constraints, a fingerprint made NOT NULL).
bool target_usable(GenerationProbe* gens, int target) {
    TupleDesc desc = RelationGetDescr(gens[target].heap);
    Columns col = find_columns(desc);
    return !((desc->constr != nullptr && desc->constr->num_check > 0) || TupleDescAttr(desc, col.fingerprint - 1)->attnotnull);
}

// The table or a generation altered (a trigger, row security, a CHECK constraint...) or a
// generation made between the look at the generations and the lock that fixes them: the batch
// needs the SQL path, but this call holds ROW EXCLUSIVE already. A retry looks before it locks.
[[noreturn]] void generation_changed() {
    ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                    errmsg("could not record message ids: a dedup generation changed during the call"),
                    errdetail("A generation made or altered meanwhile needs the SQL path (a trigger, row security, "
                              "another unique index, a CHECK constraint)."),
                    errhint("Retry the transaction.")));
    pg_unreachable();
}

// The plain insertion (issue 31): the batch's new records as ordinary tuples, in a
// subtransaction of their own, with no speculative insertion, which costs a 48-byte
// XLOG_HEAP_CONFIRM per new id. Ordinary tuples cannot be withdrawn one by one (a DELETE
// would leave the record in progress to others until our transaction ends, and logical
// decoding would replay an insert of a key already on record), so the subtransaction is the
// withdrawal: at the first sign of another record of a key (the unique index's partial check
// in the target, or a look at the other generations: core/generation_guard.h) it is rolled
// back, which removes every record of it at once and ends the waits of anyone who found one
// (they wait on its xid), and the caller records the batch again the speculative way, which
// waits where needed. The first key was looked up before (a redelivered batch never comes
// here), and nothing here waits. Returns whether the batch was recorded this way: on_record
// then holds 0 for the new keys.
bool plain_insertion_allowed() {
    // A subtransaction's xid stays in the transaction's cache in PGPROC until it ends; past 64
    // the cache overflows and every snapshot of every backend must then consult pg_subtrans.
    // So a transaction's 64th batch and later (63 subtransactions with an xid before) take the
    // speculative way.
    return !IsInParallelMode() && !MyProc->subxidStatus.overflowed &&
           MyProc->subxidStatus.count < PGPROC_MAX_CACHED_SUBXIDS - 1;
}

bool insert_plainly(GenerationProbe* gens, int n, int target, Relation heap, ResultRelInfo* rri, EState* estate,
                    TupleTableSlot* slot, const Columns& col, Datum consumer, TimestampTz now,
                    const std::vector<core::DedupKey>& keys, const std::vector<int>* partitions,
                    std::vector<char>& on_record, MemoryContext row_context, CommandId cid) {
    MemoryContext call_context = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    TupleDesc desc = RelationGetDescr(heap);
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(call_context);
    // The probes' scans and slots were opened before: their buffer pins belong to the
    // caller's resource owner, never to the subtransaction's (whose end would release them).
    // The subtransaction's xid lock is taken on its own owner all the same (AssignTransactionId).
    CurrentResourceOwner = owner;
    volatile bool kept = true;
    PG_TRY();
    {
        for (std::size_t k = 0; k < keys.size() && kept; ++k) {
            const core::DedupKey& key = keys[k];
            if (key.recording_element < 0) continue;
            if ((k & 1023) == 0) CHECK_FOR_INTERRUPTS();
            MemoryContextReset(row_context);
            MemoryContextSwitchTo(row_context);
            fill_slot(slot, desc, col, consumer, key, now, partitions != nullptr ? (*partitions)[k] : -1);
            table_tuple_insert(heap, slot, cid, 0, nullptr);
            bool conflict = false;
            List* rechecks = compat::insert_index_tuples(rri, slot, estate, false, true, &conflict, NIL);
            list_free(rechecks);
            ResetPerTupleExprContext(estate);
            MemoryContextSwitchTo(call_context);
            if (!conflict && n > 1) {
                int at = -1;
                const core::filter::KeyHash hash = core::filter::key_hash(key.id.data(), consumer_text(consumer));
                conflict = look(gens, n, target, -1, PointerGetDatum(key.id.data()), consumer, hash, &at).found !=
                           guard::Found::none;
            }
            if (conflict)
                kept = false;
            else
                on_record[k] = 0;
        }
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(call_context);
        ErrorData* error = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(call_context);
        CurrentResourceOwner = owner;
        ReThrowError(error);
    }
    PG_END_TRY();
    if (kept)
        ReleaseCurrentSubTransaction();
    else
        RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(call_context);
    CurrentResourceOwner = owner;
    if (!kept)
        for (std::size_t k = 0; k < keys.size(); ++k) on_record[k] = 1;
    return kept;
}

// Whether the batch's first key that may be recorded is absent from every generation (not on
// record, not in progress): only such a batch tries the plain insertion.
bool first_key_absent(GenerationProbe* gens, int n, const std::vector<core::DedupKey>& keys, Datum consumer) {
    for (const core::DedupKey& key : keys) {
        if (key.recording_element < 0) continue;
        int at = -1;
        const core::filter::KeyHash hash = core::filter::key_hash(key.id.data(), consumer_text(consumer));
        return look(gens, n, -1, -1, PointerGetDatum(key.id.data()), consumer, hash, &at).found == guard::Found::none;
    }
    return false;  // nothing to record
}

// The generations' insertion (see the file's head and core/generation_guard.h). Runs inside
// insert_new_keys's pg_call, with the parent open under ACCESS SHARE. Refused (nothing locked
// beyond ACCESS SHARE) when a generation needs the SQL path; otherwise it takes ROW EXCLUSIVE on
// the parent and the target generation only once the generations allow the native path: a
// batch the SQL path takes must never have held ROW EXCLUSIVE on the parent, or that path's
// SHARE ROW EXCLUSIVE would be an upgrade, and stores upgrading side by side deadlock (40P01,
// test/isolation/specs/dedup_generation_sql_path_locks.spec). Under ROW EXCLUSIVE the set of
// generations is fixed until the transaction ends.
NativeInsert insert_into_generations(Relation parent, const std::string& consumer, TimestampTz now,
                                     const std::vector<core::DedupKey>& keys, std::vector<char>& on_record,
                                     std::vector<TimestampTz>& found_at) {
    GenerationBound* bounds = nullptr;
    GenerationProbe* gens = nullptr;
    int n = 0, target = -1;
    for (bool locked = false;;) {
        n = read_generation_bounds(parent, &bounds);
        target = -1;
        for (int i = 0; i < n; ++i)
            if (bounds[i].start <= now && now < bounds[i].end) target = i;
        if (target < 0) return NativeInsert::no_generation;
        gens = static_cast<GenerationProbe*>(palloc0(sizeof(GenerationProbe) * n));
        bool usable = true;
        int opened = 0;
        for (; opened < n && usable; ++opened) usable = open_probe(&gens[opened], bounds[opened].relid, AccessShareLock);
        usable = usable && target_usable(gens, target);
        if (!usable) {
            for (int i = 0; i < opened; ++i) close_probe(&gens[i], true);
            if (!locked) return NativeInsert::refused;
            generation_changed();
        }
        if (locked) break;
        LockRelationOid(RelationGetRelid(parent), RowExclusiveLock);
        locked = true;
        // A trigger or row security given to the parent before the lock was granted.
        if (parent->trigdesc != nullptr || parent->rd_rel->relrowsecurity) {
            for (int i = 0; i < n; ++i) close_probe(&gens[i], true);
            generation_changed();
        }
        // Generations made or dropped before the lock was granted: look at the set again, now fixed.
        GenerationBound* after = nullptr;
        const int m = read_generation_bounds(parent, &after);
        if (same_generations(bounds, n, after, m)) break;
        for (int i = 0; i < n; ++i) close_probe(&gens[i], true);
    }
    // Sealed after the store's unsealing look (generations.cpp) and before it opened the
    // generation: nothing may enter it, and this call holds ROW EXCLUSIVE on the parent.
    if (gens[target].sealed) {
        for (int i = 0; i < n; ++i) close_probe(&gens[i], true);
        return NativeInsert::target_sealed;
    }
    LockRelationOid(bounds[target].relid, RowExclusiveLock);
    Relation heap = gens[target].heap;
    // A seal committed before ROW EXCLUSIVE was granted (it waited for this lock's holders).
    if (heap->trigdesc != nullptr || !target_usable(gens, target)) generation_changed();
    TupleDesc desc = RelationGetDescr(heap);
    Columns col = find_columns(desc);
    EState* estate = CreateExecutorState();
    ResultRelInfo* rri = makeNode(ResultRelInfo);
    InitResultRelInfo(rri, heap, 1, nullptr, 0);
    ExecOpenIndices(rri, true);
    if (primary_key_only(rri) == nullptr)  // open_probe saw one unique index, the primary key
        elog(ERROR, "whizbang: the indexes of a dedup generation changed during the call");

    TupleTableSlot* slot = table_slot_create(heap, nullptr);
    MemoryContext row_context = AllocSetContextCreate(CurrentMemoryContext, "whizbang dedup row", ALLOCSET_SMALL_SIZES);
    MemoryContext call_context = CurrentMemoryContext;
    Datum consumer_datum = PointerGetDatum(cstring_to_text_with_len(consumer.data(), static_cast<int>(consumer.size())));
    CommandId cid = GetCurrentCommandId(true);
    auto finish = [&] {
        MemoryContextDelete(row_context);
        ExecDropSingleTupleTableSlot(slot);
        ExecCloseIndices(rri);
        FreeExecutorState(estate);
        for (int i = 0; i < n; ++i) close_probe(&gens[i], true);
    };
    if (plain_insertion_allowed() && first_key_absent(gens, n, keys, consumer_datum) &&
        insert_plainly(gens, n, target, heap, rri, estate, slot, col, consumer_datum, now, keys, nullptr, on_record,
                       row_context, cid)) {
        finish();
        return NativeInsert::done;
    }
    TransactionId xid = GetCurrentTransactionId();
    uint32 token = SpeculativeInsertionLockAcquire(xid);

    std::size_t seen_keys = 0, seen_on_record = 0;
    int hint = -1;
    for (std::size_t k = 0; k < keys.size(); ++k) {
        const core::DedupKey& key = keys[k];
        on_record[k] = 1;
        if (key.recording_element < 0) continue;  // a lookup: never inserted here
        bool must_look = look_first(seen_keys, seen_on_record);
        ++seen_keys;
        ++seen_on_record;  // until proven new
        if ((k & 1023) == 0) CHECK_FOR_INTERRUPTS();
        Datum message_id = PointerGetDatum(key.id.data());
        const core::filter::KeyHash hash = core::filter::key_hash(key.id.data(), consumer);

        for (int attempt = 0;; ++attempt) {
            if (attempt == kMaxConflictRetries)
                ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                                errmsg("could not record message id: it kept conflicting with concurrent writers")));
            int at = -1;
            if (must_look) {
                guard::Sighting seen = look(gens, n, -1, hint, message_id, consumer_datum, hash, &at);
                guard::Before before = guard::before_insert(seen);
                if (before == guard::Before::duplicate) {
                    // On record: the update counts it, in the generation named by its first_seen_at.
                    bool isnull = false;
                    Datum seen_at = slot_getattr(gens[at].found, gens[at].first_seen_at, &isnull);
                    if (!isnull) found_at[k] = DatumGetTimestampTz(seen_at);
                    hint = at;
                    break;
                }
                if (before == guard::Before::wait) {
                    // Holding no record of this key, and our token released: nobody waits on a waiter.
                    SpeculativeInsertionLockRelease(xid);
                    wait_for(seen, gens[at].dirty.speculativeToken, &gens[at]);
                    token = SpeculativeInsertionLockAcquire(xid);
                    continue;
                }
            }

            MemoryContextReset(row_context);
            MemoryContextSwitchTo(row_context);
            fill_slot(slot, desc, col, consumer_datum, key, now, -1);
            table_tuple_insert_speculative(heap, slot, cid, 0, nullptr, token);
            bool conflict = false;
            List* rechecks = compat::insert_index_tuples(rri, slot, estate, false, true, &conflict, NIL);
            list_free(rechecks);
            ResetPerTupleExprContext(estate);
            MemoryContextSwitchTo(call_context);
            if (conflict) {
                // Inside the generation its unique index decided: as on a single table.
                table_tuple_complete_speculative(heap, slot, token, false);
                must_look = true;
                continue;
            }
            // The other generations, now that ours holds the speculative record.
            guard::After after = guard::After::keep;
            for (;;) {
                guard::Sighting seen = look(gens, n, target, -1, message_id, consumer_datum, hash, &at);
                after = guard::after_insert(seen, xid);
                if (after != guard::After::wait_keeping) break;
                // The younger transaction withdraws; wait for its speculative insertion to end.
                wait_for(seen, gens[at].dirty.speculativeToken, &gens[at]);
            }
            table_tuple_complete_speculative(heap, slot, token, after == guard::After::keep);
            if (after == guard::After::keep) {
                on_record[k] = 0;
                --seen_on_record;
                break;
            }
            must_look = true;  // withdrawn: look again, which waits or finds it on record
        }
    }

    SpeculativeInsertionLockRelease(xid);
    finish();
    return NativeInsert::done;
}

}  // namespace

NativeInsert insert_new_keys(const char* function_name, const std::string& consumer, TimestampTz now,
                     const std::vector<core::DedupKey>& keys, const std::vector<int>& partitions,
                     std::vector<char>& on_record, std::vector<TimestampTz>& found_at) {
    // Everything below runs on the PostgreSQL side of the boundary: it creates no C++
    // object and calls nothing that throws, so a PostgreSQL error unwinds cleanly.
    return pg_call([&]() -> NativeInsert {
        // The executor would refuse these writes; so must a path that bypasses it.
        PreventCommandIfReadOnly(function_name);
        PreventCommandIfParallelMode(function_name);
        PreventCommandDuringRecovery(function_name);

        // Inside a routed call the node's shard of the partition (shard_scope.h).
        Oid relid = whizbang_relid_unguarded("wh_message_deduplication");
        // ACCESS SHARE first: a table in generations that sends the batch to the SQL path must
        // not hold ROW EXCLUSIVE before that path's SHARE ROW EXCLUSIVE (two such stores would
        // deadlock on the upgrade).
        Relation rel = table_open(relid, AccessShareLock);
        // Checked together and up front: recording needs all three (a duplicate is an UPDATE),
        // and a missing one should fail on the first call, not on the first redelivery.
        for (AclMode mode : {ACL_SELECT, ACL_INSERT, ACL_UPDATE}) {
            AclResult acl = pg_class_aclcheck(relid, GetUserId(), mode);
            if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(rel));
        }
        // Anything the executor would enforce beyond the shipped table (triggers, row security,
        // CHECK constraints, columns added by the user with their defaults) sends the batch
        // through the SQL path, which enforces it.
        if (RelationGetForm(rel)->relkind == RELKIND_PARTITIONED_TABLE) {
            NativeInsert result = NativeInsert::refused;
            if (rel->trigdesc == nullptr && !rel->rd_rel->relrowsecurity)
                result = insert_into_generations(rel, consumer, now, keys, on_record, found_at);
            // The SQL path's lock (dedup.cpp), taken here at once in the mode it needs: never
            // ROW EXCLUSIVE first (see insert_into_generations).
            if (result == NativeInsert::refused) LockRelationOid(relid, ShareRowExclusiveLock);
            table_close(rel, NoLock);  // the lock fixes the generations until the transaction ends
            return result;
        }
        LockRelationOid(relid, RowExclusiveLock);
        TupleDesc shape = RelationGetDescr(rel);
        int live_columns = 0;
        for (int i = 0; i < shape->natts; ++i) live_columns += TupleDescAttr(shape, i)->attisdropped ? 0 : 1;
        const bool checks = shape->constr != nullptr && shape->constr->num_check > 0;
        Columns col = find_columns(shape);
        const bool fingerprint_required = TupleDescAttr(shape, col.fingerprint - 1)->attnotnull;
        if (rel->trigdesc != nullptr || rel->rd_rel->relrowsecurity || live_columns != (col.partition_number ? 7 : 6) ||
            checks ||
            fingerprint_required) {
            table_close(rel, NoLock);
            return NativeInsert::refused;
        }

        EState* estate = CreateExecutorState();
        ResultRelInfo* rri = makeNode(ResultRelInfo);
        InitResultRelInfo(rri, rel, 1, nullptr, 0);
        ExecOpenIndices(rri, true);
        Relation pk = primary_key_only(rri);
        if (pk == nullptr) {
            ExecCloseIndices(rri);
            FreeExecutorState(estate);
            table_close(rel, NoLock);
            return NativeInsert::refused;
        }

        TupleDesc desc = RelationGetDescr(rel);
        TupleTableSlot* slot = table_slot_create(rel, nullptr);
        TupleTableSlot* found = table_slot_create(rel, nullptr);
        MemoryContext row_context =
            AllocSetContextCreate(CurrentMemoryContext, "whizbang dedup row", ALLOCSET_SMALL_SIZES);
        MemoryContext call_context = CurrentMemoryContext;
        Datum consumer_datum =
            PointerGetDatum(cstring_to_text_with_len(consumer.data(), static_cast<int>(consumer.size())));
        CommandId cid = GetCurrentCommandId(true);
        if (plain_insertion_allowed()) {
            // The plain insertion, as in a generation: the table as the one generation.
            GenerationProbe self{};
            bool plain = open_probe(&self, relid, AccessShareLock) && first_key_absent(&self, 1, keys, consumer_datum) &&
                         insert_plainly(&self, 1, 0, rel, rri, estate, slot, col, consumer_datum, now, keys,
                                        col.partition_number ? &partitions : nullptr, on_record, row_context, cid);
            close_probe(&self, true);
            if (plain) {
                MemoryContextDelete(row_context);
                ExecDropSingleTupleTableSlot(found);
                ExecDropSingleTupleTableSlot(slot);
                ExecCloseIndices(rri);
                FreeExecutorState(estate);
                table_close(rel, NoLock);
                return NativeInsert::done;
            }
        }
        TransactionId xid = GetCurrentTransactionId();
        // One speculative-insertion token for the batch: a transaction that finds one of our
        // tuples waits for our transaction anyway, so it loses nothing by waiting on the token
        // until the batch is done, and we save two lock-manager calls per id.
        uint32 token = SpeculativeInsertionLockAcquire(xid);

        std::size_t seen = 0, seen_on_record = 0;
        for (std::size_t k = 0; k < keys.size(); ++k) {
            const core::DedupKey& key = keys[k];
            on_record[k] = 1;
            if (key.recording_element < 0) continue;  // a lookup: never inserted here
            const bool look = look_first(seen, seen_on_record);
            ++seen;
            ++seen_on_record;  // until proven new
            if ((k & 1023) == 0) CHECK_FOR_INTERRUPTS();

            for (int attempt = 0;; ++attempt) {
                if (attempt == kMaxConflictRetries)
                    ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                                    errmsg("could not record message id: it kept conflicting with concurrent writers")));
                MemoryContextReset(row_context);
                MemoryContextSwitchTo(row_context);
                fill_slot(slot, desc, col, consumer_datum, key, now, col.partition_number ? partitions[k] : -1);

                if (look && attempt == 0) {
                    TransactionId wait_xid = InvalidTransactionId;
                    uint32 wait_token = 0;
                    Holder holder = find_holder(rel, pk, slot, found, &wait_xid, &wait_token);
                    if (holder == Holder::live) {
                        MemoryContextSwitchTo(call_context);
                        break;
                    }
                }

                table_tuple_insert_speculative(rel, slot, cid, 0, nullptr, token);
                bool conflict = false;
                List* rechecks = compat::insert_index_tuples(rri, slot, estate, false, true, &conflict, NIL);
                list_free(rechecks);
                table_tuple_complete_speculative(rel, slot, token, !conflict);
                ResetPerTupleExprContext(estate);
                MemoryContextSwitchTo(call_context);
                if (!conflict) {
                    on_record[k] = 0;
                    --seen_on_record;
                    break;
                }

                TransactionId wait_xid = InvalidTransactionId;
                uint32 wait_token = 0;
                Holder holder = find_holder(rel, pk, slot, found, &wait_xid, &wait_token);
                if (holder == Holder::live) break;  // on record: the upsert counts it
                if (holder == Holder::in_progress) {
                    // Another transaction holds this key: wait for it to finish, then retry.
                    // Our token is released while we wait, so nobody waits on a waiter.
                    SpeculativeInsertionLockRelease(xid);
                    if (wait_token != 0)
                        SpeculativeInsertionWait(wait_xid, wait_token);
                    else
                        XactLockTableWait(wait_xid, rel, &found->tts_tid, XLTW_InsertIndex);
                    token = SpeculativeInsertionLockAcquire(xid);
                }
                // none: the conflicting row died meanwhile; insert again.
            }
        }

        SpeculativeInsertionLockRelease(xid);
        MemoryContextDelete(row_context);
        ExecDropSingleTupleTableSlot(found);
        ExecDropSingleTupleTableSlot(slot);
        ExecCloseIndices(rri);
        FreeExecutorState(estate);
        table_close(rel, NoLock);  // keep the lock until the end of the transaction
        return NativeInsert::done;
    });
}

}  // namespace whizbang::pg
