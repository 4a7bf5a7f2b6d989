// Native insertion into wh_message_deduplication.
//
// The executor's INSERT ... ON CONFLICT probes the unique index before inserting, so a new
// key costs two descents of the primary key. Dedup batches are mostly new ids, so this path
// inserts speculatively and lets the unique check of the insertion itself detect a conflict
// (UNIQUE_CHECK_PARTIAL); only then does it look at the conflicting row, abort its own
// speculative tuple and either wait for the other inserter or report the key as on record.
// Keys are handled in sorted order, so concurrent batches wait for each other at most.
#include <cstring>

#include "pg/store/dedup_store.h"

#include "pg/citus/shard_scope.h"


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

}  // namespace

bool insert_new_keys(const char* function_name, const std::string& consumer, TimestampTz now,
                     const std::vector<core::DedupKey>& keys, const std::vector<int>& partitions,
                     std::vector<char>& on_record) {
    // Everything below runs on the PostgreSQL side of the boundary: it creates no C++
    // object and calls nothing that throws, so a PostgreSQL error unwinds cleanly.
    return pg_call([&]() -> bool {
        // The executor would refuse these writes; so must a path that bypasses it.
        PreventCommandIfReadOnly(function_name);
        PreventCommandIfParallelMode(function_name);
        PreventCommandDuringRecovery(function_name);

        // Inside a routed call the node's shard of the partition (shard_scope.h).
        Oid relid = whizbang_relid_unguarded("wh_message_deduplication");
        Relation rel = table_open(relid, RowExclusiveLock);
        // Checked together and up front: recording needs all three (a duplicate is an UPDATE),
        // and a missing one should fail on the first call, not on the first redelivery.
        for (AclMode mode : {ACL_SELECT, ACL_INSERT, ACL_UPDATE}) {
            AclResult acl = pg_class_aclcheck(relid, GetUserId(), mode);
            if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_TABLE, RelationGetRelationName(rel));
        }
        // Anything the executor would enforce beyond the shipped table (triggers, row security,
        // CHECK constraints, columns added by the user with their defaults) sends the batch
        // through the SQL path, which enforces it.
        TupleDesc shape = RelationGetDescr(rel);
        int live_columns = 0;
        for (int i = 0; i < shape->natts; ++i) live_columns += TupleDescAttr(shape, i)->attisdropped ? 0 : 1;
        const bool checks = shape->constr != nullptr && shape->constr->num_check > 0;
        Columns col = find_columns(shape);
        const bool fingerprint_required = TupleDescAttr(shape, col.fingerprint - 1)->attnotnull;
        if (rel->trigdesc != nullptr || rel->rd_rel->relrowsecurity || live_columns != (col.partition_number ? 7 : 6) ||
            checks ||
            fingerprint_required) {
            table_close(rel, RowExclusiveLock);
            return false;
        }

        EState* estate = CreateExecutorState();
        ResultRelInfo* rri = makeNode(ResultRelInfo);
        InitResultRelInfo(rri, rel, 1, nullptr, 0);
        ExecOpenIndices(rri, true);
        Relation pk = primary_key_only(rri);
        if (pk == nullptr) {
            ExecCloseIndices(rri);
            FreeExecutorState(estate);
            table_close(rel, RowExclusiveLock);
            return false;
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
                ExecClearTuple(slot);
                for (int i = 0; i < desc->natts; ++i) slot->tts_isnull[i] = true;
                slot->tts_values[col.consumer - 1] = consumer_datum;
                slot->tts_values[col.message_id - 1] = PointerGetDatum(key.id.data());
                slot->tts_values[col.first_seen_at - 1] = TimestampTzGetDatum(now);
                slot->tts_values[col.observation_count - 1] = Int32GetDatum(key.observations);
                slot->tts_values[col.conflict_count - 1] = Int32GetDatum(0);
                for (AttrNumber a : {col.consumer, col.message_id, col.first_seen_at, col.observation_count,
                                     col.conflict_count})
                    slot->tts_isnull[a - 1] = false;
                if (col.partition_number && partitions[k] >= 0) {
                    slot->tts_values[col.partition_number - 1] = Int32GetDatum(partitions[k]);
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
        return true;
    });
}

}  // namespace whizbang::pg
