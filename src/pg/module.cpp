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
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "unknown self-test mode \"" + mode + "\"");
}
