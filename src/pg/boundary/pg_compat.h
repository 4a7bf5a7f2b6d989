// Every difference between the PostgreSQL majors whizbang supports (15, 16, 17, 18), in one
// place: the rest of src/pg calls these and never tests PG_VERSION_NUM itself (Citus's
// pg_version_compat.h habit). Include it after PostgreSQL's headers. A new major starts
// here: build against it, and each error names what to add.
#pragma once

extern "C" {
#include "access/genam.h"
#include "access/transam.h"
#include "executor/executor.h"
#include "replication/message.h"
#include "replication/slot.h"
#include "storage/proc.h"
#if PG_VERSION_NUM >= 160000
#include "varatt.h"  // VARDATA_ANY and friends left postgres.h in 16
#endif
}

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "whizbang supports PostgreSQL 15, 16, 17 and 18"
#endif

namespace whizbang::pg::compat {

// The index of this backend's PGPROC in ProcGlobal->allProcs (17 renamed it the backend's
// "proc number" and dropped PGPROC.pgprocno).
inline int my_proc_number() {
#if PG_VERSION_NUM >= 170000
    return MyProcNumber;
#else
    return MyProc->pgprocno;
#endif
}

// The oldest xid whose status the commit log still holds (VACUUM truncates it below that);
// read under XactTruncationLock. 17 renamed ShmemVariableCache to TransamVariables.
inline TransactionId oldest_clog_xid() {
#if PG_VERSION_NUM >= 170000
    return TransamVariables->oldestClogXid;
#else
    return ShmemVariableCache->oldestClogXid;
#endif
}

// index_beginscan without instrumentation (18 added the IndexScanInstrumentation argument).
inline IndexScanDesc index_beginscan(Relation heap, Relation index, Snapshot snapshot, int nkeys, int norderbys) {
#if PG_VERSION_NUM >= 180000
    return ::index_beginscan(heap, index, snapshot, nullptr, nkeys, norderbys);
#else
    return ::index_beginscan(heap, index, snapshot, nkeys, norderbys);
#endif
}

// ExecInsertIndexTuples into every index (16 added onlySummarizing, for HOT updates; whizbang
// only inserts, so all indexes get the tuple).
inline List* insert_index_tuples(ResultRelInfo* rri, TupleTableSlot* slot, EState* estate, bool update, bool no_dup_err,
                                 bool* spec_conflict, List* arbiter_indexes) {
#if PG_VERSION_NUM >= 160000
    return ExecInsertIndexTuples(rri, slot, estate, update, no_dup_err, spec_conflict, arbiter_indexes, false);
#else
    return ExecInsertIndexTuples(rri, slot, estate, update, no_dup_err, spec_conflict, arbiter_indexes);
#endif
}

// A transactional or not logical decoding message (17 added `flush`; whizbang's messages ride
// with their transaction's commit record, which is flushed anyway).
inline XLogRecPtr log_logical_message(const char* prefix, const char* message, size_t size, bool transactional) {
#if PG_VERSION_NUM >= 170000
    return LogLogicalMessage(prefix, message, size, transactional, false);
#else
    return LogLogicalMessage(prefix, message, size, transactional);
#endif
}

// Whether a replication slot was invalidated (max_slot_wal_keep_size and, from 16, conflicts
// on a standby); read under ReplicationSlotControlLock. 16 replaced invalidated_at by a cause.
inline bool slot_invalidated(const ReplicationSlot* slot) {
#if PG_VERSION_NUM >= 160000
    return slot->data.invalidated != RS_INVAL_NONE;
#else
    return XLogRecPtrIsInvalid(slot->data.restart_lsn) && !XLogRecPtrIsInvalid(slot->data.invalidated_at);
#endif
}

}  // namespace whizbang::pg::compat
