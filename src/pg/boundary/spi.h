// SPI with plans prepared once per backend (pg_cron's habit) and every call guarded.
// Queries are fully schema-qualified, operators included, so no caller's search_path can
// change what they mean.
#pragma once

#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// Whether schema whizbang has a table of this name: tells which version's objects a database
// has while the library serves it before its ALTER EXTENSION whizbang UPDATE.
bool whizbang_table_exists(const char* relname);

// Whether this database still keeps the work state in tables of its own (wh_inbox_work /
// wh_outbox_work): its whizbang predates 0.14.0 and has not been updated yet. The library serves
// it until ALTER EXTENSION whizbang UPDATE merges them into the message tables (docs/internals.md).
bool split_layout();

// `sql`, written for message tables that carry their work state (0.14.0), for the split layout:
// every whizbang.wh_inbox / whizbang.wh_outbox names the work table instead, except where the
// name is followed by the marker comment /*message*/ (the message table in both layouts).
std::string split_twin(const std::string& sql);

// A statement prepared on first use and kept for the life of the backend.
class CachedPlan {
public:
    CachedPlan(std::string sql, std::initializer_list<Oid> arg_types)
        : sql_(std::move(sql)), split_sql_(split_of(sql_)), arg_types_(arg_types) {}
    CachedPlan(std::string sql, std::vector<Oid> arg_types)
        : sql_(std::move(sql)), split_sql_(split_of(sql_)), arg_types_(std::move(arg_types)) {}

    // The statement's text for the split layout where split_twin's is not right (it reads
    // message columns too, or deletes a message and its work row).
    CachedPlan& split_as(std::string sql) {
        split_sql_ = std::move(sql);
        return *this;
    }

    // For statements whose best plan depends on how big the work tables are right now (claims,
    // row locks): planned for the actual parameters on every execution, never a generic plan
    // that was cheapest when the queue was empty.
    static CachedPlan replanned(std::string sql, std::vector<Oid> arg_types) {
        CachedPlan plan(std::move(sql), std::move(arg_types));
        plan.cursor_options_ = CURSOR_OPT_CUSTOM_PLAN;
        return plan;
    }
    // Executes with `values` (NULL where nulls[i] == 'n'); returns SPI_processed.
    uint64 execute(const std::vector<Datum>& values, const char* nulls = nullptr);
    // The same, in a snapshot taken now (GetLatestSnapshot), whatever the isolation level: to
    // check what another transaction committed a moment ago.
    uint64 execute_latest(const std::vector<Datum>& values, const char* nulls = nullptr);
    // Opens a cursor over the statement (a SELECT); fetch its rows with spi_fetch().
    Portal open_cursor(const std::vector<Datum>& values, const char* nulls = nullptr);

private:
    SPIPlanPtr prepare(const std::vector<Datum>& values, const char* nulls);
    static std::string split_of(const std::string& sql) {
        std::string twin = split_twin(sql);
        return twin == sql ? std::string() : twin;
    }
    std::string sql_;
    std::string split_sql_;  // empty: the same text in both layouts
    std::vector<Oid> arg_types_;
    SPIPlanPtr plan_ = nullptr, split_plan_ = nullptr;
    std::unordered_map<std::string, SPIPlanPtr> shard_plans_;  // by shard scope (shard_scope_key), bounded
    int cursor_options_ = 0;
};

// Connects to SPI for the scope of one function call. On an error the transaction abort
// cleans SPI up, so the destructor only finishes a connection that is still open.
class SpiConnection {
public:
    // `nonatomic`: the connection of a procedure CALLed where it may end transactions (its
    // CallContext says so), for commit().
    explicit SpiConnection(bool nonatomic = false);
    ~SpiConnection();
    SpiConnection(const SpiConnection&) = delete;
    SpiConnection& operator=(const SpiConnection&) = delete;
    void finish();
    // Commits the current transaction and starts the next (nonatomic connections only).
    void commit();

private:
    bool open_ = false;
};

// Appends the first `rows` rows of the last result to a materialized SRF's result, copied now
// (SPI_finish frees them); the result's columns are the statement's, in order.
void spi_rows_to_result(ReturnSetInfo* rsinfo, uint64 rows);

// Fetches up to `count` more rows of a cursor into the last result; returns how many came.
uint64 spi_fetch(Portal portal, long count);
void spi_close(Portal portal);

// Column `col` (1-based) of row `row` of the last result; nullptr-safe NULL check via *isnull.
Datum spi_value(uint64 row, int col, bool* isnull);

// Runs one statement built at run time (DDL, LOCK, maintenance's statements), no parameters;
// returns SPI_processed. Its SQL must be fully qualified as every other statement here.
uint64 run_sql(const std::string& sql);

}  // namespace whizbang::pg
