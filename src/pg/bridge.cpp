#include <new>

#include "core/error.h"
#include "pg/bridge.h"

namespace whizbang::pg {

namespace {

// Everything needed to raise the error once the C++ body has unwound. Plain data only:
// the frame that raises it must hold nothing with a destructor.
struct PendingError {
    ErrorData* postgres = nullptr;
    int sqlstate = 0;
    char* message = nullptr;
    char* detail = nullptr;
    char* hint = nullptr;
};

// Copies into the current memory context without ever raising (we are inside a catch block).
char* copy_text(const std::string& s) {
    if (s.empty()) return nullptr;
    auto* out = static_cast<char*>(
        MemoryContextAllocExtended(CurrentMemoryContext, s.size() + 1, MCXT_ALLOC_NO_OOM));
    if (out) memcpy(out, s.c_str(), s.size() + 1);
    return out;
}

int sqlstate_of(core::InputError::Kind kind) {
    switch (kind) {
        case core::InputError::Kind::invalid_json: return ERRCODE_INVALID_TEXT_REPRESENTATION;
        case core::InputError::Kind::invalid_parameter: return ERRCODE_INVALID_PARAMETER_VALUE;
        case core::InputError::Kind::out_of_range: return ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE;
        case core::InputError::Kind::limit_exceeded: return ERRCODE_PROGRAM_LIMIT_EXCEEDED;
    }
    return ERRCODE_INTERNAL_ERROR;
}

Datum call_body(FunctionCallInfo fcinfo, EntryBody body, PendingError* pending) noexcept {
    try {
        return body(fcinfo);
    } catch (const PgError& e) {
        pending->postgres = e.data();
    } catch (const SqlError& e) {
        pending->sqlstate = e.sqlstate();
        pending->message = copy_text(e.what());
        pending->detail = copy_text(e.detail());
        pending->hint = copy_text(e.hint());
    } catch (const core::InputError& e) {
        pending->sqlstate = sqlstate_of(e.kind());
        pending->message = copy_text(e.what());
    } catch (const std::bad_alloc&) {
        pending->sqlstate = ERRCODE_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        pending->sqlstate = ERRCODE_INTERNAL_ERROR;
        pending->message = copy_text(std::string("unexpected C++ exception: ") + e.what());
    } catch (...) {
        pending->sqlstate = ERRCODE_INTERNAL_ERROR;
    }
    return (Datum)0;
}

}  // namespace

ErrorData* capture_pg_error(MemoryContext return_to) {
    MemoryContextSwitchTo(return_to);
    ErrorData* data = CopyErrorData();
    FlushErrorState();
    return data;
}

Datum run_entry(FunctionCallInfo fcinfo, EntryBody body) {
    PendingError pending;
    Datum result = call_body(fcinfo, body, &pending);
    if (pending.postgres) ReThrowError(pending.postgres);
    if (pending.sqlstate == ERRCODE_OUT_OF_MEMORY && !pending.message)
        ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory in whizbang")));
    if (pending.sqlstate)
        ereport(ERROR, (errcode(pending.sqlstate),
                        errmsg_internal("%s", pending.message ? pending.message : "unknown C++ error in whizbang"),
                        pending.detail ? errdetail_internal("%s", pending.detail) : 0,
                        pending.hint ? errhint("%s", pending.hint) : 0));
    return result;
}

}  // namespace whizbang::pg
