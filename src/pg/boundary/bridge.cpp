#include <cstring>
#include <new>

#include "core/error.h"
#include "pg/boundary/bridge.h"


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
    // Where the message goes (truncated) when even a palloc of it fails: out of memory must
    // still report what went wrong, not "unknown error".
    char fallback[256] = {};
};

// Copies prefix + text into the current memory context. Called inside a catch block of a
// noexcept function, so it must neither throw (no std::string: an allocation failure there
// terminates the backend) nor raise (MCXT_ALLOC_NO_OOM returns NULL instead; HUGE lifts the
// 1 GB request limit, whose check would raise). Falls back to `fallback`, or NULL without one.
char* copy_text(const char* prefix, const char* text, char* fallback = nullptr, size_t fallback_size = 0) noexcept {
    if (text == nullptr || (*text == '\0' && *prefix == '\0')) return nullptr;
    const size_t prefix_len = strlen(prefix), text_len = strlen(text);
    auto* out = static_cast<char*>(MemoryContextAllocExtended(CurrentMemoryContext, prefix_len + text_len + 1,
                                                              MCXT_ALLOC_NO_OOM | MCXT_ALLOC_HUGE));
    if (out) {
        memcpy(out, prefix, prefix_len);
        memcpy(out + prefix_len, text, text_len + 1);
        return out;
    }
    if (fallback == nullptr || fallback_size == 0) return nullptr;
    strlcpy(fallback, prefix, fallback_size);
    strlcat(fallback, text, fallback_size);
    return fallback;
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

EntryHooks entry_hooks;

// Holds the entry hooks' scope for the body's life.
class EntryScope {
public:
    EntryScope() : entered_(entry_hooks.enter != nullptr && entry_hooks.enter()) {}
    ~EntryScope() {
        if (entered_ && entry_hooks.leave) entry_hooks.leave();
    }
    EntryScope(const EntryScope&) = delete;
    EntryScope& operator=(const EntryScope&) = delete;

private:
    bool entered_;
};

Datum call_body(FunctionCallInfo fcinfo, EntryBody body, PendingError* pending) noexcept {
    try {
        EntryScope scope;
        return body(fcinfo);
    } catch (const PgError& e) {
        pending->postgres = e.data();
    } catch (const SqlError& e) {
        pending->sqlstate = e.sqlstate();
        pending->message = copy_text("", e.what(), pending->fallback, sizeof pending->fallback);
        pending->detail = copy_text("", e.detail().c_str());
        pending->hint = copy_text("", e.hint().c_str());
    } catch (const core::InputError& e) {
        pending->sqlstate = sqlstate_of(e.kind());
        pending->message = copy_text("", e.what(), pending->fallback, sizeof pending->fallback);
    } catch (const std::bad_alloc&) {
        pending->sqlstate = ERRCODE_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        pending->sqlstate = ERRCODE_INTERNAL_ERROR;
        pending->message = copy_text("unexpected C++ exception: ", e.what(), pending->fallback, sizeof pending->fallback);
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

void set_entry_hooks(EntryHooks hooks) { entry_hooks = hooks; }

namespace {
std::vector<DeclaredRouting>& routings() {
    static std::vector<DeclaredRouting> all;  // filled by static initializers at load time
    return all;
}
}  // namespace

RoutingDeclaration::RoutingDeclaration(const char* symbol, Routing routing) { routings().push_back({symbol, routing}); }

const std::vector<DeclaredRouting>& declared_routings() { return routings(); }

const char* routing_name(Routing routing) {
    switch (routing) {
        case Routing::local: return "local";
        case Routing::by_message: return "by_message";
        case Routing::by_partition: return "by_partition";
        case Routing::by_claimed_id: return "by_claimed_id";
        case Routing::by_lookup: return "by_lookup";
        case Routing::every_node: return "every_node";
        case Routing::citus_sql: return "citus_sql";
    }
    return "unknown";
}

namespace {

// A privilege error raised by one of whizbang's own statements (a grant the entry's check of
// required_privileges.h does not cover, row-level security): its context would print the
// internal SQL, which tells the caller nothing to act on and shows statements it never wrote
// (issue 30). Raised again without that context, the callers' (a PL/pgSQL caller's lines) added
// anew by ThrowErrorData, and with a hint where it has none. Other errors go on unchanged.
void rethrow(ErrorData* error) {
    if (error->sqlerrcode != ERRCODE_INSUFFICIENT_PRIVILEGE || error->context == nullptr) ReThrowError(error);
    error->context = nullptr;
    const bool missing_grant =
        error->message_id != nullptr && strncmp(error->message_id, "permission denied for", 21) == 0;
    if (error->hint == nullptr && missing_grant)
        error->hint = pstrdup("whizbang runs its statements as the calling role: grant the role the capability it "
                              "uses, as the extension's owner with whizbang.grant_worker(role, capabilities) or "
                              "whizbang.grant_admin(role, capabilities) (docs/security.md).");
    ThrowErrorData(error);
    ReThrowError(error);  // not reached: an ERROR does not return
}

}  // namespace

Datum run_entry(FunctionCallInfo fcinfo, EntryBody body) {
    PendingError pending;
    Datum result = call_body(fcinfo, body, &pending);
    if (pending.postgres) rethrow(pending.postgres);
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
