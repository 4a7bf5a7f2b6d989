// The C++ <-> PostgreSQL boundary (DESIGN §6).
//
// Two rules keep the backend alive:
//  1. No C++ exception crosses into PostgreSQL. Every SQL-callable function is declared with
//     WB_FUNCTION, whose wrapper runs the body inside try/catch and raises the PostgreSQL
//     error only after every C++ object of the body has been destroyed.
//  2. No PostgreSQL error longjmp skips a C++ destructor. A PostgreSQL call that can raise an
//     error while C++ objects are alive goes through pg_call(), which catches the longjmp
//     and turns it into a PgError exception carrying the original error (SQLSTATE included).
#pragma once

#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "pg/boundary/postgres_headers.h"

namespace whizbang::pg {

// A PostgreSQL error caught by pg_call(); rethrown unchanged by the entry wrapper.
class PgError : public std::exception {
public:
    explicit PgError(ErrorData* data) : data_(data) {}
    const char* what() const noexcept override { return data_ ? data_->message : "postgres error"; }
    ErrorData* data() const noexcept { return data_; }

private:
    ErrorData* data_;  // palloc'd copy in the caller's memory context
};

// An error raised by whizbang's own C++ code, with the SQLSTATE the user should see.
class SqlError : public std::exception {
public:
    SqlError(int sqlstate, std::string message, std::string detail = {}, std::string hint = {})
        : sqlstate_(sqlstate), message_(std::move(message)), detail_(std::move(detail)), hint_(std::move(hint)) {}
    const char* what() const noexcept override { return message_.c_str(); }
    int sqlstate() const noexcept { return sqlstate_; }
    const std::string& detail() const noexcept { return detail_; }
    const std::string& hint() const noexcept { return hint_; }

private:
    int sqlstate_;
    std::string message_, detail_, hint_;
};

ErrorData* capture_pg_error(MemoryContext return_to);

// Calls f(args...) and converts a PostgreSQL ERROR raised inside into PgError.
// f must not hold C++ objects with destructors itself: it is the PostgreSQL side.
//
// A C++ exception thrown by f (a nested pg_call's PgError, a SqlError, bad_alloc) must not
// unwind through PG_TRY: PG_END_TRY would never run, and PG_exception_stack and
// error_context_stack would keep pointing into this dead frame, so the next ereport(ERROR)
// would longjmp into it. It is caught inside the PG_TRY block, kept in an exception_ptr that
// lives outside it (the exception object itself is on the C++ runtime's heap, so it survives the
// sigsetjmp boundary), and rethrown once PG_END_TRY has restored both stacks.
template <typename F, typename... Args>
auto pg_call(F&& f, Args&&... args) -> decltype(f(std::forward<Args>(args)...)) {
    using Result = decltype(f(std::forward<Args>(args)...));
    MemoryContext caller_context = CurrentMemoryContext;
    ErrorData* volatile error = nullptr;
    std::exception_ptr cpp_error;
    std::exception_ptr* volatile cpp_error_slot = &cpp_error;  // written only on the non-longjmp path
    if constexpr (std::is_void_v<Result>) {
        PG_TRY();
        {
            try {
                f(std::forward<Args>(args)...);
            } catch (...) {
                *cpp_error_slot = std::current_exception();
            }
        }
        PG_CATCH();
        { error = capture_pg_error(caller_context); }
        PG_END_TRY();
        if (error) throw PgError(error);
        if (cpp_error) std::rethrow_exception(cpp_error);
    } else {
        // Result must be trivially copyable: it crosses a sigsetjmp boundary.
        static_assert(std::is_trivially_copyable_v<Result>, "pg_call returns plain values only");
        Result volatile_safe{};
        Result* volatile out = &volatile_safe;
        PG_TRY();
        {
            try {
                *out = f(std::forward<Args>(args)...);
            } catch (...) {
                *cpp_error_slot = std::current_exception();
            }
        }
        PG_CATCH();
        { error = capture_pg_error(caller_context); }
        PG_END_TRY();
        if (error) throw PgError(error);
        if (cpp_error) std::rethrow_exception(cpp_error);
        return volatile_safe;
    }
}

using EntryBody = Datum (*)(FunctionCallInfo);

// Runs body; any C++ exception becomes a PostgreSQL ERROR raised after the body unwound.
Datum run_entry(FunctionCallInfo fcinfo, EntryBody body);

// What runs around every entry's body, installed once by the library (module.cpp): `enter`
// before the body (it may throw; then the body does not run), `leave` after it when enter
// answered true, also when the body threw. The boundary knows no more of it (the scale-out
// layer enters a routed call's shard scope there).
struct EntryHooks {
    bool (*enter)() = nullptr;
    void (*leave)() = nullptr;
};
void set_entry_hooks(EntryHooks hooks);

// How a SQL-callable function's work reaches the data on a distributed install (Citus,
// docs/scaleout.md "How a call reaches its node"), stated once per function by
// WB_ROUTED_FUNCTION; whizbang._routing_policies() lists them and a test checks that every C
// function of the extension has one.
enum class Routing {
    local,         // never routed: no table data (pure functions, triggers, internals)
    by_message,    // each message (its stream's or its own partition) to the node of its shard
    by_partition,  // the claim: p_partitions' nodes, else every reachable node
    by_claimed_id, // outcome calls: the nodes of the ids claims through this server handed out, else every node
    by_lookup,     // a look-up of the rows' partitions first (dead letters), then their nodes
    every_node,    // fan-out: every node, each visiting the shards routed to it
    citus_sql,     // plain SQL on the distributed tables, which Citus routes (idempotency keys)
};
const char* routing_name(Routing routing);

// The declared routing of every SQL-callable function: C symbol -> policy.
struct RoutingDeclaration {
    RoutingDeclaration(const char* symbol, Routing routing);
};
struct DeclaredRouting {
    const char* symbol;
    Routing routing;
};
const std::vector<DeclaredRouting>& declared_routings();

}  // namespace whizbang::pg

// Declares the SQL-callable function `name` with its routing policy (whizbang::pg::Routing);
// the braces that follow are its C++ body.
#define WB_ROUTED_FUNCTION(name, routing)                                          \
    static const whizbang::pg::RoutingDeclaration name##_routing(#name, whizbang::pg::Routing::routing); \
    WB_FUNCTION(name)

// Declares the SQL-callable function `name`; the braces that follow are its C++ body.
#define WB_FUNCTION(name)                                                          \
    static Datum name##_body(FunctionCallInfo fcinfo);                             \
    extern "C" {                                                                   \
    PG_FUNCTION_INFO_V1(name);                                                     \
    Datum name(PG_FUNCTION_ARGS) { return whizbang::pg::run_entry(fcinfo, name##_body); } \
    }                                                                              \
    static Datum name##_body(FunctionCallInfo fcinfo)
