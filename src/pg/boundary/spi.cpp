#include <cctype>
#include <cstring>
#include <string>

#include "pg/boundary/spi.h"

#include "pg/citus/shard_scope.h"

namespace whizbang::pg {

namespace {
constexpr std::size_t kMaxShardPlans = 64;
}  // namespace

SPIPlanPtr CachedPlan::prepare(const std::vector<Datum>& values, const char* nulls) {
    // A wrong count here would hand PostgreSQL a bad pointer: refuse it loudly instead.
    if (values.size() != arg_types_.size() || (nulls && strlen(nulls) != arg_types_.size()))
        throw SqlError(ERRCODE_INTERNAL_ERROR, std::string("whizbang: wrong number of parameters for: ") + sql_);
    // Inside a routed call on a Citus node the statement names the local shards (shard_scope.h):
    // one plan per shard, kept like the plain one.
    // Kept by the scope's key, so the text is rewritten once per shard, not per call; at most
    // kMaxShardPlans per statement (a node holds few shards; moves bring others).
    const bool sharded = in_shard_scope();
    const bool split = !split_sql_.empty() && split_layout();
    const std::string shard_key = sharded ? (split ? "split " : "") + shard_scope_key() : std::string();
    if (sharded && shard_plans_.size() >= kMaxShardPlans && shard_plans_.count(shard_key) == 0) {
        pg_call([&] {
            for (auto& [key, p] : shard_plans_)
                if (p) SPI_freeplan(p);
        });
        shard_plans_.clear();
    }
    SPIPlanPtr& plan = sharded ? shard_plans_[shard_key] : split ? split_plan_ : plan_;
    if (!plan) {
        const std::string& sql = split ? split_sql_ : sql_;
        const std::string text = sharded ? shard_sql(sql) : sql;
        plan = pg_call([&] {
            SPIPlanPtr p = SPI_prepare_cursor(text.c_str(), static_cast<int>(arg_types_.size()), arg_types_.data(),
                                              cursor_options_);
            if (p == nullptr) elog(ERROR, "whizbang: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
            SPI_keepplan(p);
            return p;
        });
    }
    return plan;
}

bool whizbang_table_exists(const char* relname) {
    return pg_call([&] {
        Oid schema = get_namespace_oid("whizbang", true);
        return OidIsValid(schema) && OidIsValid(get_relname_relid(relname, schema));
    });
}

bool split_layout() { return whizbang_table_exists("wh_inbox_work"); }

std::string split_twin(const std::string& sql) {
    static const std::string marker = "/*message*/";
    std::string out;
    out.reserve(sql.size() + 64);
    for (std::size_t at = 0; at < sql.size();) {
        bool matched = false;
        for (const char* table : {"whizbang.wh_inbox", "whizbang.wh_outbox"}) {
            const std::size_t n = strlen(table);
            if (sql.compare(at, n, table) != 0) continue;
            const char next = at + n < sql.size() ? sql[at + n] : ' ';
            if (next == '_' || isalnum(static_cast<unsigned char>(next))) continue;  // a companion table
            out.append(table);
            if (sql.compare(at + n, marker.size(), marker) != 0) out.append("_work");
            at += n;
            matched = true;
            break;
        }
        if (!matched) out.push_back(sql[at++]);
    }
    return out;
}

uint64 CachedPlan::execute(const std::vector<Datum>& values, const char* nulls) {
    SPIPlanPtr plan = prepare(values, nulls);
    return pg_call([&] {
        int rc = SPI_execute_plan(plan, const_cast<Datum*>(values.data()), nulls, false, 0);
        if (rc < 0) elog(ERROR, "whizbang: SPI_execute_plan failed: %s", SPI_result_code_string(rc));
        return SPI_processed;
    });
}

uint64 CachedPlan::execute_latest(const std::vector<Datum>& values, const char* nulls) {
    SPIPlanPtr plan = prepare(values, nulls);
    return pg_call([&] {
        int rc = SPI_execute_snapshot(plan, const_cast<Datum*>(values.data()), nulls, GetLatestSnapshot(),
                                      InvalidSnapshot, false, false, 0);
        if (rc < 0) elog(ERROR, "whizbang: SPI_execute_snapshot failed: %s", SPI_result_code_string(rc));
        return SPI_processed;
    });
}

Portal CachedPlan::open_cursor(const std::vector<Datum>& values, const char* nulls) {
    SPIPlanPtr plan = prepare(values, nulls);
    // Not read-only: in READ COMMITTED the cursor then reads a snapshot taken now, not the
    // calling statement's.
    return pg_call([&] { return SPI_cursor_open(nullptr, plan, const_cast<Datum*>(values.data()), nulls, false); });
}

uint64 spi_fetch(Portal portal, long count) {
    return pg_call([&] {
        SPI_cursor_fetch(portal, true, count);
        return SPI_processed;
    });
}

void spi_close(Portal portal) {
    pg_call([&] { SPI_cursor_close(portal); });
}

SpiConnection::SpiConnection(bool nonatomic) {
    pg_call([nonatomic] {
        if (SPI_connect_ext(nonatomic ? SPI_OPT_NONATOMIC : 0) != SPI_OK_CONNECT)
            elog(ERROR, "whizbang: SPI_connect failed");
    });
    open_ = true;
}

SpiConnection::~SpiConnection() {
    // Reached while unwinding a C++ exception: the coming ERROR's abort cleans SPI up, and
    // calling SPI_finish here could itself raise inside a destructor.
}

void SpiConnection::finish() {
    if (!open_) return;
    open_ = false;
    pg_call([] { SPI_finish(); });
}

void SpiConnection::commit() {
    pg_call([] { SPI_commit(); });
}

void spi_rows_to_result(ReturnSetInfo* rsinfo, uint64 rows) {
    pg_call([&] {
        const int ncols = SPI_tuptable->tupdesc->natts;
        Datum* values = static_cast<Datum*>(palloc(sizeof(Datum) * ncols));
        bool* nulls = static_cast<bool*>(palloc(sizeof(bool) * ncols));
        for (uint64 r = 0; r < rows; ++r) {
            for (int col = 0; col < ncols; ++col)
                values[col] = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, col + 1, &nulls[col]);
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
        pfree(values);
        pfree(nulls);
    });
}

Datum spi_value(uint64 row, int col, bool* isnull) {
    return pg_call([&] { return SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, isnull); });
}

uint64 run_sql(const std::string& sql) {
    return pg_call([&] {
        int rc = SPI_execute(sql.c_str(), false, 0);
        if (rc < 0) elog(ERROR, "whizbang: SPI_execute failed (%d): %s", rc, sql.c_str());
        return SPI_processed;
    });
}

}  // namespace whizbang::pg
