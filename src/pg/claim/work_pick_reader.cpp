// The claim's hand-out without SQL (work_pick_reader.h).
//
// A claim hands out at most a few hundred rows, each found by its primary key: planning a
// statement for that on every call (its best plan depends on how big the tables are now) cost
// more than the lookups. Here the primary keys are probed directly through the index AM, as
// the dedup write path does, in one snapshot taken after the claim's leases were taken.
// Anything the executor would do for a query and this does not — row security — sends the
// claim to the SQL path instead; the caller's SELECT privilege is checked as a query would.
#include <cstring>

#include "core/partition.h"
#include "pg/claim/work_pick_reader.h"

#include "pg/citus/shard_scope.h"

extern "C" {
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/transam.h"
#include "executor/tuptable.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/acl.h"
}

namespace whizbang::pg {
namespace {

struct TableNames {
    const char *work, *work_pkey, *stream_index, *messages, *messages_pkey;
    const char *handler, *destination, *envelope;  // columns of the message table (nullptr: none)
};
// Since 0.14.0 the work state is in the message row: "work" and "messages" name one table, read
// once per pick.
const TableNames kNames[2] = {
    {"wh_inbox", "wh_inbox_pkey", "wh_inbox_stream", "wh_inbox", "wh_inbox_pkey", "handler_name", nullptr,
     "envelope"},
    {"wh_outbox", "wh_outbox_pkey", "wh_outbox_stream", "wh_outbox", "wh_outbox_pkey", nullptr,
     "destination", "event_data"}};

// A key on index column `col` (1-based) with the operator of `strategy` from its opfamily.
void index_key(ScanKey key, Relation index, int col, StrategyNumber strategy, Datum value) {
    const Oid type = index->rd_opcintype[col - 1];
    const Oid op = get_opfamily_member(index->rd_opfamily[col - 1], type, type, strategy);
    ScanKeyEntryInitialize(key, 0, col, strategy, InvalidOid, index->rd_indcollation[col - 1], get_opcode(op), value);
}

int attnum(Relation rel, const char* name) {
    if (name == nullptr) return 0;
    TupleDesc d = RelationGetDescr(rel);
    for (int i = 0; i < d->natts; ++i) {
        Form_pg_attribute a = TupleDescAttr(d, i);
        if (!a->attisdropped && strcmp(NameStr(a->attname), name) == 0) return i + 1;
    }
    return 0;
}

Datum value(TupleTableSlot* slot, int att, bool* isnull) {
    *isnull = att == 0 || slot->tts_isnull[att - 1];
    return *isnull ? (Datum)0 : slot->tts_values[att - 1];
}

struct WorkColumns {
    int message_id, consumer, stream_id, stream_seq, partition_number, scheduled_for, attempts, processed_at;
};
struct MessageColumns {
    int handler, destination, message_type, envelope, metadata, scope;
};

// Whether another transaction is deleting or updating the row in `slot` right now. Its lease says
// so too, except after a server restart: a completion held in PREPARE TRANSACTION survives it,
// its lease does not, and the row it deletes must still go to no one (DESIGN §3.8).
bool changing_elsewhere(TupleTableSlot* slot) {
    if (!TTS_IS_BUFFERTUPLE(slot)) return false;
    BufferHeapTupleTableSlot* row = reinterpret_cast<BufferHeapTupleTableSlot*>(slot);
    if (!BufferIsValid(row->buffer) || row->base.tuple == nullptr) return false;
    LockBuffer(row->buffer, BUFFER_LOCK_SHARE);
    HeapTupleHeader header = row->base.tuple->t_data;
    const uint16 mask = header->t_infomask;
    bool changing = false;
    if (!(mask & HEAP_XMAX_INVALID) && !HEAP_XMAX_IS_LOCKED_ONLY(mask)) {
        const TransactionId xmax = (mask & HEAP_XMAX_IS_MULTI) ? HeapTupleGetUpdateXid(header) : HeapTupleHeaderGetRawXmax(header);
        changing = TransactionIdIsValid(xmax) && !TransactionIdIsCurrentTransactionId(xmax) && TransactionIdIsInProgress(xmax);
    }
    LockBuffer(row->buffer, BUFFER_LOCK_UNLOCK);
    return changing;
}

// Opens whizbang's table `heap_name` and its index `index_name` for reading through the index AM,
// with a snapshot taken now and a slot. False, with nothing left open, where either is missing,
// the table has row security (the caller takes the SQL path), or columns(heap) finds a column
// missing. Checks the caller's SELECT privilege as a query would.
template <typename Columns>
bool open_index_read(const char* heap_name, const char* index_name, Relation& heap, Relation& index, Snapshot& snapshot,
                     TupleTableSlot*& slot, Columns columns) {
    const Oid heap_id = whizbang_relid_unguarded(heap_name), index_id = whizbang_relid_unguarded(index_name);
    if (!OidIsValid(heap_id) || !OidIsValid(index_id)) return false;
    AclResult acl = pg_class_aclcheck(heap_id, GetUserId(), ACL_SELECT);
    if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_TABLE, heap_name);
    heap = table_open(heap_id, AccessShareLock);
    if (heap->rd_rel->relrowsecurity || !columns(heap)) {
        table_close(heap, AccessShareLock);
        heap = nullptr;
        return false;
    }
    index = index_open(index_id, AccessShareLock);
    snapshot = RegisterSnapshot(GetLatestSnapshot());
    slot = table_slot_create(heap, nullptr);
    return true;
}

// Closes what open_index_read opened; the locks stay to the end of the transaction, as a
// query keeps them.
void close_index_read(Relation heap, Relation index, Snapshot snapshot, TupleTableSlot* slot) {
    ExecDropSingleTupleTableSlot(slot);
    UnregisterSnapshot(snapshot);
    index_close(index, NoLock);
    table_close(heap, NoLock);
}

}  // namespace

std::vector<char> rows_changing_elsewhere(Source source, const std::vector<ItemPointerData>& tids) {
    std::vector<char> changing(tids.size(), 0);
    const char* work_name = kNames[static_cast<int>(source)].work;
    pg_call([&] {
        const Oid work_id = whizbang_relid_unguarded(work_name);
        if (!OidIsValid(work_id)) return;
        Relation work = table_open(work_id, AccessShareLock);
        TupleTableSlot* row = table_slot_create(work, nullptr);
        for (std::size_t i = 0; i < tids.size(); ++i) {
            ItemPointerData tid = tids[i];
            // The version the statement read: its deleter, if any, is in its header.
            if (table_tuple_fetch_row_version(work, &tid, SnapshotAny, row)) changing[i] = changing_elsewhere(row);
            ExecClearTuple(row);
        }
        ExecDropSingleTupleTableSlot(row);
        table_close(work, NoLock);
    });
    return changing;
}

std::optional<std::vector<PickRead>> read_picks(Source source, TupleDesc result_desc, const std::vector<PickToRead>& picks,
                                                TimestampTz now, const RetryPolicies& policies) {
    std::vector<PickRead> out(picks.size());
    const TableNames& names = kNames[static_cast<int>(source)];
    // Everything below runs on the PostgreSQL side: no C++ object is created and nothing throws.
    const bool read = pg_call([&]() -> bool {
        // Inside a routed call on a Citus node: the local shards (shard_scope.h).
        const Oid work_id = whizbang_relid_unguarded(names.work);
        const Oid work_pkey_id = whizbang_relid_unguarded(names.work_pkey),
                  stream_id = whizbang_relid_unguarded(names.stream_index);
        if (!OidIsValid(work_id) || !OidIsValid(work_pkey_id) || !OidIsValid(stream_id)) return false;
        AclResult acl = pg_class_aclcheck(work_id, GetUserId(), ACL_SELECT);
        if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_TABLE, get_rel_name(work_id));
        Relation work = table_open(work_id, AccessShareLock), messages = work;
        const WorkColumns wc{attnum(work, "message_id"),   attnum(work, "consumer"),         attnum(work, "stream_id"),
                             attnum(work, "stream_seq"),   attnum(work, "partition_number"), attnum(work, "scheduled_for"),
                             attnum(work, "attempts"),     attnum(work, "processed_at")};
        const MessageColumns mc{attnum(messages, names.handler),      attnum(messages, names.destination),
                                attnum(messages, "message_type"),     attnum(messages, names.envelope),
                                attnum(messages, "metadata"),         attnum(messages, "scope")};
        const bool shaped = wc.message_id && wc.consumer && wc.stream_id && wc.stream_seq && wc.partition_number &&
                            wc.scheduled_for && wc.attempts && wc.processed_at && mc.message_type && mc.envelope &&
                            mc.metadata && mc.scope && (mc.handler || mc.destination);
        if (!shaped || work->rd_rel->relrowsecurity) {
            table_close(work, AccessShareLock);
            return false;
        }
        Relation work_pkey = index_open(work_pkey_id, AccessShareLock), stream = index_open(stream_id, AccessShareLock);
        // The inbox's key is (message_id, consumer), the outbox's (message_id) (and partition_number
        // after them under Citus).
        const int id_keys = source == Source::inbox ? 2 : 1;
        Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
        TupleTableSlot* row = table_slot_create(work, nullptr);
        TupleTableSlot* older = table_slot_create(work, nullptr);
        TupleTableSlot* message = row;
        IndexScanDesc by_id = compat::index_beginscan(work, work_pkey, snapshot, id_keys, 0);
        IndexScanDesc by_stream = compat::index_beginscan(work, stream, snapshot, 3, 0);
        const Datum source_text = PointerGetDatum(cstring_to_text(source_name(source)));
        for (std::size_t i = 0; i < picks.size(); ++i) {
            const PickToRead& p = picks[i];
            const Datum id = PointerGetDatum(p.key->id.data());
            const Datum consumer =
                PointerGetDatum(cstring_to_text_with_len(p.key->consumer.data(), static_cast<int>(p.key->consumer.size())));
            ScanKeyData keys[3];
            index_key(&keys[0], work_pkey, 1, BTEqualStrategyNumber, id);
            if (id_keys == 2) index_key(&keys[1], work_pkey, 2, BTEqualStrategyNumber, consumer);
            index_rescan(by_id, keys, id_keys, nullptr, 0);
            if (!index_getnext_slot(by_id, ForwardScanDirection, row)) continue;  // finished meanwhile
            if (changing_elsewhere(row)) continue;
            slot_getallattrs(row);
            bool isnull = false;
            (void)value(row, wc.processed_at, &isnull);
            if (!isnull) continue;
            if (DatumGetTimestampTz(value(row, wc.scheduled_for, &isnull)) > now) continue;
            bool no_stream = false;
            const Datum stream_value = value(row, wc.stream_id, &no_stream);
            const int64 seq = no_stream ? 0 : DatumGetInt64(value(row, wc.stream_seq, &isnull));
            if (p.head && !no_stream) {  // still the oldest unfinished row of its stream?
                index_key(&keys[0], stream, 1, BTEqualStrategyNumber, consumer);
                index_key(&keys[1], stream, 2, BTEqualStrategyNumber, stream_value);
                index_key(&keys[2], stream, 3, BTLessStrategyNumber, Int64GetDatum(seq));
                index_rescan(by_stream, keys, 3, nullptr, 0);
                if (index_getnext_slot(by_stream, ForwardScanDirection, older)) continue;
            }
            out[i].seq = seq;
            out[i].attempts = DatumGetInt32(value(row, wc.attempts, &isnull)) + 1;
            if (out[i].attempts > policies.of(p.key->consumer).max_attempts) {
                out[i].state = 2;
                continue;
            }
            Datum values[14];
            bool nulls[14];
            values[0] = source_text;
            nulls[0] = false;
            values[1] = value(row, wc.message_id, &nulls[1]);
            values[2] = stream_value;
            nulls[2] = no_stream;
            values[3] = value(row, wc.partition_number, &nulls[3]);
            values[4] = value(message, mc.handler, &nulls[4]);
            values[5] = value(message, mc.destination, &nulls[5]);
            values[6] = value(message, mc.message_type, &nulls[6]);
            values[7] = value(message, mc.envelope, &nulls[7]);
            values[8] = value(message, mc.metadata, &nulls[8]);
            values[9] = value(message, mc.scope, &nulls[9]);
            values[10] = Int32GetDatum(out[i].attempts);
            nulls[10] = false;
            values[11] = Int64GetDatum(p.token);
            nulls[11] = false;
            values[12] = TimestampTzGetDatum(p.expiry);
            nulls[12] = false;
            values[13] = source == Source::inbox ? consumer : (Datum)0;  // the outbox has no consumer
            nulls[13] = source != Source::inbox;
            out[i].row = heap_form_tuple(result_desc, values, nulls);
            out[i].state = 1;
        }
        index_endscan(by_id);
        index_endscan(by_stream);
        ExecDropSingleTupleTableSlot(row);
        ExecDropSingleTupleTableSlot(older);
        UnregisterSnapshot(snapshot);
        // Locks are kept to the end of the transaction, as a query keeps them.
        index_close(work_pkey, NoLock);
        index_close(stream, NoLock);
        table_close(work, NoLock);
        return true;
    });
    if (!read) return std::nullopt;
    return out;
}

bool DueRowScan::open(Source source, TimestampTz now) {
    source_ = source;
    now_ = now;
    const char* work = source == Source::inbox ? "wh_inbox" : "wh_outbox";
    const char* due = source == Source::inbox ? "wh_inbox_due" : "wh_outbox_due";
    return pg_call([&]() -> bool {
        if (!open_index_read(work, due, heap_, index_, snapshot_, slot_, [&](Relation heap) {
                id_col_ = attnum(heap, "message_id");
                consumer_col_ = attnum(heap, "consumer");
                attempts_col_ = attnum(heap, "attempts");
                return id_col_ && consumer_col_ && attempts_col_;
            }))
            return false;
        scan_ = compat::index_beginscan(heap_, index_, snapshot_, 1, 0);
        ScanKeyData key;
        index_key(&key, index_, 1, BTLessEqualStrategyNumber, TimestampTzGetDatum(now));
        index_rescan(scan_, &key, 1, nullptr, 0);
        return true;
    });
}

std::vector<DueRow> DueRowScan::next(int want, const std::optional<std::string>& consumer, const std::vector<char>& partitions,
                                     int partition_count) {
    std::vector<DueRow> rows;
    rows.reserve(static_cast<std::size_t>(want));
    while (!done_ && static_cast<int>(rows.size()) < want) {
        // A batch of index entries at a time; the C++ work on each row happens outside pg_call.
        struct Raw {
            core::Uuid id;
            std::string consumer;
            int attempts;
        };
        std::vector<Raw> raw;
        raw.reserve(64);
        done_ = pg_call([&]() -> bool {
            for (int n = 0; n < 64; ++n) {
                if (!index_getnext_slot(scan_, ForwardScanDirection, slot_)) return true;
                slot_getallattrs(slot_);
                if (slot_->tts_isnull[id_col_ - 1] || slot_->tts_isnull[consumer_col_ - 1]) continue;
                text* c = DatumGetTextPP(slot_->tts_values[consumer_col_ - 1]);
                Raw r;
                memcpy(r.id.data(), DatumGetPointer(slot_->tts_values[id_col_ - 1]), 16);
                r.consumer.assign(VARDATA_ANY(c), VARSIZE_ANY_EXHDR(c));
                r.attempts = DatumGetInt32(slot_->tts_values[attempts_col_ - 1]);
                raw.push_back(std::move(r));
            }
            return false;
        });
        for (Raw& r : raw) {
            if (consumer && r.consumer != *consumer) continue;
            if (!partitions.empty()) {
                const int part = core::partition_of(r.id, partition_count);
                if (part < 0 || part >= static_cast<int>(partitions.size()) || !partitions[part]) continue;
            }
            if (shm::held_now({source_, r.id, r.consumer}, now_)) continue;
            rows.push_back({r.id, std::move(r.consumer), r.attempts});
        }
    }
    return rows;
}

void DueRowScan::close() {
    if (!heap_) return;
    pg_call([&] {
        index_endscan(scan_);
        close_index_read(heap_, index_, snapshot_, slot_);
    });
    heap_ = nullptr;
}

bool StreamWalk::open(Source source) {
    const TableNames& names = kNames[static_cast<int>(source)];
    return pg_call([&]() -> bool {
        return open_index_read(names.work, names.stream_index, heap_, index_, snapshot_, slot_, [&](Relation heap) {
            id_col_ = attnum(heap, "message_id");
            consumer_col_ = attnum(heap, "consumer");
            attempts_col_ = attnum(heap, "attempts");
            stream_col_ = attnum(heap, "stream_id");
            seq_col_ = attnum(heap, "stream_seq");
            due_col_ = attnum(heap, "scheduled_for");
            lease_col_ = attnum(heap, "lease_expiry");
            return id_col_ && consumer_col_ && attempts_col_ && stream_col_ && seq_col_ && due_col_ && lease_col_;
        });
    });
}

IndexScanDesc StreamWalk::scan(int nkeys) {
    if (!scans_[nkeys]) scans_[nkeys] = compat::index_beginscan(heap_, index_, snapshot_, nkeys, 0);
    return scans_[nkeys];
}

bool StreamWalk::read(StreamRow& row) {
    slot_getallattrs(slot_);
    const bool* isnull = slot_->tts_isnull;
    if (isnull[id_col_ - 1] || isnull[consumer_col_ - 1] || isnull[stream_col_ - 1] || isnull[seq_col_ - 1]) return false;
    text* c = DatumGetTextPP(slot_->tts_values[consumer_col_ - 1]);
    memcpy(row.id.data(), DatumGetPointer(slot_->tts_values[id_col_ - 1]), 16);
    row.consumer.assign(VARDATA_ANY(c), VARSIZE_ANY_EXHDR(c));
    row.attempts = DatumGetInt32(slot_->tts_values[attempts_col_ - 1]);
    memcpy(row.stream.data(), DatumGetPointer(slot_->tts_values[stream_col_ - 1]), 16);
    row.seq = DatumGetInt64(slot_->tts_values[seq_col_ - 1]);
    row.due = DatumGetTimestampTz(slot_->tts_values[due_col_ - 1]);
    if (isnull[lease_col_ - 1]) row.lease.reset();
    else row.lease = DatumGetTimestampTz(slot_->tts_values[lease_col_ - 1]);
    return true;
}

std::optional<StreamRow> StreamWalk::next_head(const StreamCursor& after, const std::optional<std::string>& consumer) {
    // The first entry after `after` in (consumer, stream_id) order is the head of the next
    // stream: within a stream the index is in stream_seq order. Across consumers (no consumer
    // given) the rest of the cursor's consumer is read first, then the consumers after it.
    const std::string* fixed = consumer ? &*consumer : (after.set ? &after.consumer : nullptr);
    for (int pass = 0; pass < 2; ++pass) {
        if (pass == 1 && (consumer || !after.set)) break;
        StreamRow row;
        const bool found = pg_call([&]() -> bool {
            ScanKeyData keys[2];
            int nkeys = 0;
            if (pass == 0 && fixed) {
                const Datum c = PointerGetDatum(cstring_to_text_with_len(fixed->data(), static_cast<int>(fixed->size())));
                index_key(&keys[nkeys++], index_, 1, BTEqualStrategyNumber, c);
                if (after.set && (!consumer || *consumer == after.consumer))
                    index_key(&keys[nkeys++], index_, 2, BTGreaterStrategyNumber, PointerGetDatum(after.stream.data()));
            } else if (pass == 1) {
                const Datum c = PointerGetDatum(cstring_to_text_with_len(after.consumer.data(), static_cast<int>(after.consumer.size())));
                index_key(&keys[nkeys++], index_, 1, BTGreaterStrategyNumber, c);
            }
            IndexScanDesc walk = scan(nkeys);
            index_rescan(walk, keys, nkeys, nullptr, 0);
            while (index_getnext_slot(walk, ForwardScanDirection, slot_))
                if (read(row)) return true;
            return false;
        });
        if (found) return row;
    }
    return std::nullopt;
}

std::vector<StreamRow> StreamWalk::after(const std::string& consumer, const core::Uuid& stream, int64_t seq, int max) {
    std::vector<StreamRow> out;
    if (max <= 0) return out;
    out.reserve(static_cast<std::size_t>(std::min(max, 1024)));
    StreamRow row;
    pg_call([&] {
        ScanKeyData keys[3];
        index_key(&keys[0], index_, 1, BTEqualStrategyNumber,
                  PointerGetDatum(cstring_to_text_with_len(consumer.data(), static_cast<int>(consumer.size()))));
        index_key(&keys[1], index_, 2, BTEqualStrategyNumber, PointerGetDatum(stream.data()));
        index_key(&keys[2], index_, 3, BTGreaterStrategyNumber, Int64GetDatum(seq));
        IndexScanDesc rest = scan(3);
        index_rescan(rest, keys, 3, nullptr, 0);
        while (static_cast<int>(out.size()) < max && index_getnext_slot(rest, ForwardScanDirection, slot_))
            if (read(row)) out.push_back(row);
    });
    return out;
}

void StreamWalk::close() {
    if (!heap_) return;
    pg_call([&] {
        for (IndexScanDesc& s : scans_)
            if (s) {
                index_endscan(s);
                s = nullptr;
            }
        close_index_read(heap_, index_, snapshot_, slot_);
    });
    heap_ = nullptr;
}

}  // namespace whizbang::pg
