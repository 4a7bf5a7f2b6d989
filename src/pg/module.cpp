// Library-level entry points: module magic, version, and the bridge self-test.
#include <stdexcept>
#include <string>
#include <vector>

#include "pg/bridge.h"

extern "C" {
PG_MODULE_MAGIC;
}

using namespace whizbang::pg;

#ifndef WHIZBANG_VERSION
#error "WHIZBANG_VERSION must be defined by the build (from whizbang.control)"
#endif

// version() RETURNS text: the version of the loaded library.
WB_FUNCTION(wb_version) { PG_RETURN_TEXT_P(pg_call([] { return cstring_to_text(WHIZBANG_VERSION); })); }

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
WB_FUNCTION(wb_bridge_selftest) {
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
