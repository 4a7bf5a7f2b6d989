// The library: module magic, _PG_init, the one dispatcher of transaction ends, version, and the
// bridge self-test.
#include <stdexcept>
#include <string>
#include <vector>

// Headers that include src/core come first (core/no_postgres.h).
#include "pg/citus/claim_memory.h"
#include "pg/lease/lease_store.h"
#include "pg/wait/work_wait.h"

#include "pg/boundary/bridge.h"
#include "pg/boundary/memory.h"
#include "pg/boundary/schema_hint.h"
#include "pg/citus/shard_scope.h"
#include "pg/maintenance/maintenance.h"
#include "pg/ops/counters.h"

extern "C" {
#include "tcop/utility.h"
PG_MODULE_MAGIC;
void _PG_init(void);
}

using namespace whizbang::pg;

namespace {

// Every capability that acts at the end of a transaction is called from here, in this order: the
// lease store settles the leases the transaction changed before waiting claims are woken for the
// work it made claimable (a woken claim must find a released row free); then the per-transaction
// state of routed calls and of big batches is dropped. None of them throws.
void on_xact(XactEvent event, void*) {
    lease_store_at_xact(event);
    counters_at_xact(event);
    waiters_at_xact(event);
    shard_scope_at_xact(event);
    memory_at_xact(event);
}

void on_subxact(SubXactEvent event, SubTransactionId, SubTransactionId, void*) {
    lease_store_at_subxact(event);
    counters_at_subxact(event);
    waiters_at_subxact(event);
}

// COMMIT PREPARED and ROLLBACK PREPARED end a transaction that no backend's callbacks see end:
// the lease slots it owned are settled at once (else each would keep its place in a full
// table until somebody touched its key), and waiting claims look again (it may have stored work,
// ended a lease, or brought one back that lapses sooner than they sleep).
ProcessUtility_hook_type prev_utility = nullptr;

void on_utility(PlannedStmt* pstmt, const char* query, bool read_only_tree, ProcessUtilityContext context,
                ParamListInfo params, QueryEnvironment* env, DestReceiver* dest, QueryCompletion* qc) {
    const Node* stmt = pstmt->utilityStmt;
    const bool ends_prepared = stmt && IsA(stmt, TransactionStmt) &&
                               (castNode(TransactionStmt, stmt)->kind == TRANS_STMT_COMMIT_PREPARED ||
                                castNode(TransactionStmt, stmt)->kind == TRANS_STMT_ROLLBACK_PREPARED);
    if (prev_utility)
        prev_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    if (!ends_prepared) return;
    // The prepared transaction has ended: nothing here may fail the statement that ended it.
    try {
        shm::settle_prepared();
        wake_waiters_to_look();
    } catch (...) {
        // Left to the next take that finds the table full, and to maintenance.
    }
}

}  // namespace

void _PG_init(void) {
    // A routed call's part runs in its shard's scope (pg/citus/shard_scope.h): entered around
    // every entry's body by the boundary, which knows no more of it.
    whizbang::pg::set_entry_hooks({whizbang::pg::enter_shard_scope, whizbang::pg::leave_shard_scope});
    maintenance_define_settings();
    // PostgreSQL's "permission denied for schema whizbang" gets a hint (schema_hint.h).
    install_schema_hint();
    RegisterXactCallback(on_xact, nullptr);
    RegisterSubXactCallback(on_subxact, nullptr);
    // Shared memory, postmaster settings and background workers exist only when the postmaster
    // loads the library (shared_preload_libraries).
    if (!process_shared_preload_libraries_in_progress) return;
    maintenance_preload_init();
    work_wait_preload_init();
    lease_store_preload_init();
    counters_preload_init();
    claim_memory_preload_init();
    prev_utility = ProcessUtility_hook;
    ProcessUtility_hook = on_utility;
    MarkGUCPrefixReserved("whizbang");
    maintenance_register_workers();
}

#ifndef WHIZBANG_VERSION
#error "WHIZBANG_VERSION must be defined by the build (from whizbang.control)"
#endif

// version() RETURNS text: the version of the loaded library.
WB_ROUTED_FUNCTION(wb_version, local) { PG_RETURN_TEXT_P(pg_call([] { return cstring_to_text(WHIZBANG_VERSION); })); }

namespace {

// Counts live instances so the self-test can prove that destructors ran after an error.
struct Tracked {
    static inline long live = 0;
    std::vector<char> payload = std::vector<char>(256);
    Tracked() { ++live; }
    ~Tracked() { --live; }
};

}  // namespace

// _bridge_selftest(p_mode text) RETURNS bigint. Internal: exercises the C++/PostgreSQL boundary.
//   'ok'          returns the number of live tracked objects (0 unless a destructor was skipped)
//   'cpp_error'   throws SqlError 22023 from C++ while a tracked object is alive
//   'cpp_unknown' throws a std::runtime_error (XX000)
//   'bad_alloc'   throws std::bad_alloc (53200)
//   'pg_error'    calls int4div(1, 0) through pg_call while a tracked object is alive (22012)
//   'cpp_in_pg_call'        throws SqlError 22023 inside a pg_call callback, left to run_entry
//   'cpp_in_pg_call_caught' throws inside a pg_call callback, catches it in C++, checks that
//                           PostgreSQL's error stacks were restored, then raises int4div(1, 0) (22012)
//   'nested_pg_error'       int4div(1, 0) in a pg_call inside a pg_call (22012)
WB_ROUTED_FUNCTION(wb_bridge_selftest, local) {
    std::string mode = PG_ARGISNULL(0) ? "" : pg_call([&] { return text_to_cstring(PG_GETARG_TEXT_PP(0)); });
    Tracked alive;
    if (mode == "ok") PG_RETURN_INT64(Tracked::live - 1);
    if (mode == "cpp_error") throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "bridge self-test: C++ error", "detail", "hint");
    if (mode == "cpp_unknown") throw std::runtime_error("bridge self-test: unexpected");
    if (mode == "bad_alloc") throw std::bad_alloc();
    if (mode == "pg_error") {
        pg_call([] { return DirectFunctionCall2(int4div, Int32GetDatum(1), Int32GetDatum(0)); });
        PG_RETURN_INT64(-1);  // not reached
    }
    if (mode == "cpp_in_pg_call")
        pg_call([] { throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "bridge self-test: C++ error inside pg_call", "detail", "hint"); });
    if (mode == "cpp_in_pg_call_caught") {
        sigjmp_buf* exception_stack = PG_exception_stack;
        ErrorContextCallback* context_stack = error_context_stack;
        try {
            pg_call([] { throw std::runtime_error("bridge self-test: thrown inside pg_call"); });
        } catch (const std::runtime_error&) {
        }
        if (PG_exception_stack != exception_stack || error_context_stack != context_stack) {
            // Put them back so that this error itself can be raised, instead of a jump into a dead frame.
            PG_exception_stack = exception_stack;
            error_context_stack = context_stack;
            throw SqlError(ERRCODE_INTERNAL_ERROR, "bridge self-test: pg_call left the error stack pointing at a dead frame");
        }
        pg_call([] { return DirectFunctionCall2(int4div, Int32GetDatum(1), Int32GetDatum(0)); });
        PG_RETURN_INT64(-1);  // not reached
    }
    if (mode == "nested_pg_error") {
        // The shape of a pg_call whose callback calls a helper that itself uses pg_call.
        pg_call([] { pg_call([] { return DirectFunctionCall2(int4div, Int32GetDatum(1), Int32GetDatum(0)); }); });
        PG_RETURN_INT64(-1);  // not reached
    }
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "unknown self-test mode \"" + mode + "\"");
}
