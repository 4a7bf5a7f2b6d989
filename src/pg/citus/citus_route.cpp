#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "pg/boundary/arrays.h"  // before any PostgreSQL header: it includes src/core
#include "pg/boundary/owner.h"
#include "pg/boundary/subtransaction.h"
#include "pg/citus/citus_route.h"
#include "pg/citus/distributed.h"
#include "pg/citus/shard_scope.h"
#include "pg/boundary/spi.h"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "utils/catcache.h"
#include "utils/inval.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
}

namespace whizbang::pg {

bool must_route() { return distributed() && !in_shard_scope(); }

void caller_arguments(FunctionCallInfo fcinfo, std::vector<Datum>& values, std::vector<char>& nulls) {
    const int nargs = PG_NARGS();
    values.assign(nargs, (Datum)0);
    nulls.assign(nargs, ' ');
    for (int i = 0; i < nargs; ++i) {
        if (PG_ARGISNULL(i))
            nulls[i] = 'n';
        else
            values[i] = PG_GETARG_DATUM(i);
    }
}

std::map<int64_t, std::vector<std::size_t>> routing_groups(const std::vector<int>& partitions) {
    std::map<int64_t, std::vector<std::size_t>> groups;
    if (partitions.empty()) return groups;
    Datum array = int4_array(partitions);
    AsExtensionOwner owner;  // Citus's shard functions want the tables' privileges
    // The shards of wh_inbox in either layout (no split twin): routing, shard locks and the
    // node scopes all name a partition's shard by wh_inbox's (load_node_routes, local_shards).
    static const char* const shards_sql =
        "SELECT pg_catalog.get_shard_id_for_distribution_column('whizbang.wh_inbox'::pg_catalog.regclass, p)"
        "  FROM pg_catalog.unnest($1) WITH ORDINALITY AS u(p, i) ORDER BY u.i";
    static CachedPlan shards_plan = [] {
        CachedPlan p(shards_sql, {INT4ARRAYOID});
        p.split_as(shards_sql);
        return p;
    }();
    std::vector<int64_t> shards(partitions.size(), 0);
    if (shards_plan.execute({array}) != partitions.size())
        throw SqlError(ERRCODE_INTERNAL_ERROR, "whizbang: could not find the shards of " +
                                                   std::to_string(partitions.size()) + " partitions");
    for (std::size_t r = 0; r < partitions.size(); ++r) {
        bool isnull = false;
        shards[r] = DatumGetInt64(spi_value(r, 1, &isnull));
    }
    if (in_node_scope()) {
        // A node groups by shard (each part then locks and checks its shard).
        for (std::size_t i = 0; i < partitions.size(); ++i) groups[shards[i]].push_back(i);
        return groups;
    }
    // The coordinator locks the shards first, as Citus does for its own writes, then groups by
    // node (the group of the shard's placement) as placed under those locks.
    std::vector<int64_t> distinct = shards;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    lock_shards_here(distinct);
    static CachedPlan nodes_plan(
        "SELECT (SELECT pl.groupid::pg_catalog.int8 FROM pg_catalog.pg_dist_placement pl"
        "         WHERE pl.shardid OPERATOR(pg_catalog.=) u.s LIMIT 1)"
        "  FROM pg_catalog.unnest($1) WITH ORDINALITY AS u(s, i) ORDER BY u.i",
        {INT8ARRAYOID});
    std::map<int64_t, int64_t> node_of;
    if (nodes_plan.execute({int8_array(distinct)}) != distinct.size())
        throw SqlError(ERRCODE_INTERNAL_ERROR, "whizbang: could not find the placements of " +
                                                   std::to_string(distinct.size()) + " shards");
    for (std::size_t r = 0; r < distinct.size(); ++r) {
        bool isnull = false;
        Datum g = spi_value(r, 1, &isnull);
        node_of[distinct[r]] = isnull ? -1 : DatumGetInt64(g);
    }
    for (std::size_t i = 0; i < partitions.size(); ++i) groups[node_of.at(shards[i])].push_back(i);
    return groups;
}

namespace {

// The coordinator's routing of a fan-out (a call for every shard): per node, its anchor (the
// lowest partition the node holds) and one partition per shard it holds, as Citus's metadata
// placed them when it last changed.
struct NodeRoutes {
    unsigned long generation = 0;
    std::vector<int> anchors;
    std::map<int, std::vector<int>> shard_anchors;  // node anchor -> one partition per shard
    std::vector<int64_t> shards;                     // every shard, ascending
};
NodeRoutes node_routes;

void load_node_routes() {
    std::vector<int> partition_of_row;
    std::vector<int64_t> shard_of_row, group_of_row;
    AsExtensionOwner owner;  // Citus's shard functions want the tables' privileges
    pg_call([&] {
        // All 10,000 partitions: each one's shard and the group (node) of its placement.
        int rc = SPI_execute(
            "SELECT u.p, s.shard, (SELECT pl.groupid::pg_catalog.int8 FROM pg_catalog.pg_dist_placement pl"
            "                       WHERE pl.shardid OPERATOR(pg_catalog.=) s.shard LIMIT 1)"
            "  FROM pg_catalog.generate_series(0, 9999) AS u(p),"
            "       LATERAL (SELECT pg_catalog.get_shard_id_for_distribution_column("
            "                   'whizbang.wh_inbox'::pg_catalog.regclass, u.p) AS shard) s"
            " ORDER BY u.p",
            true, 0);
        if (rc != SPI_OK_SELECT || SPI_processed != static_cast<uint64>(kDistributedPartitionCount))
            elog(ERROR, "whizbang: could not read the placements of the work tables' shards");
        for (uint64 r = 0; r < SPI_processed; ++r) {
            bool n1 = false, n2 = false, n3 = false;
            partition_of_row.push_back(DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &n1)));
            shard_of_row.push_back(DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &n2)));
            Datum g = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 3, &n3);
            group_of_row.push_back(n3 ? -1 : DatumGetInt64(g));
        }
    });
    std::map<int64_t, int> node_anchor;   // group -> lowest partition
    std::map<int64_t, int> shard_anchor;  // shard -> lowest partition
    std::map<int64_t, int64_t> shard_group;
    for (std::size_t i = 0; i < partition_of_row.size(); ++i) {
        if (group_of_row[i] < 0)
            throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                           "whizbang: shard " + std::to_string(shard_of_row[i]) + " has no placement",
                           "", "Retry: a shard operation may be under way.");
        node_anchor.emplace(group_of_row[i], partition_of_row[i]);
        shard_anchor.emplace(shard_of_row[i], partition_of_row[i]);
        shard_group[shard_of_row[i]] = group_of_row[i];
    }
    NodeRoutes fresh;
    for (const auto& [group, anchor] : node_anchor) fresh.anchors.push_back(anchor);
    for (const auto& [shard, anchor] : shard_anchor) fresh.shards.push_back(shard);
    for (const auto& [shard, anchor] : shard_anchor) fresh.shard_anchors[node_anchor.at(shard_group.at(shard))].push_back(anchor);
    node_routes = std::move(fresh);
}

}  // namespace

std::vector<int> node_shard_anchors(int node_anchor) {
    (void)routing_anchors();
    auto it = node_routes.shard_anchors.find(node_anchor);
    return it == node_routes.shard_anchors.end() ? std::vector<int>{} : it->second;
}

std::vector<int> routing_anchors() {
    (void)distributed();  // takes pending invalidations in
    const unsigned long generation = citus_metadata_generation();
    if (in_node_scope()) {
        // A fan-out node call: exactly the shards the coordinator routed here.
        if (!node_scope_shard_anchors().empty()) return node_scope_shard_anchors();
        // Otherwise one partition per shard placed here (a direct call on a node).
        static std::vector<int> local;
        static unsigned long local_generation = 0;
        if (local.empty() || local_generation != generation) {
            std::vector<int> all(kDistributedPartitionCount);
            for (int p = 0; p < kDistributedPartitionCount; ++p) all[p] = p;
            const std::vector<int64_t> here = local_shards("wh_inbox");
            std::vector<int> fresh;
            for (const auto& [group, positions] : routing_groups(all))
                if (std::binary_search(here.begin(), here.end(), group)) fresh.push_back(all[positions.front()]);
            local = std::move(fresh);
            local_generation = generation;
        }
        return local;
    }
    // Valid while Citus's metadata of the work tables is unchanged (distributed.h): a move, split
    // or rebalance drops it at once, never after a delay. Stale routing is caught on the nodes.
    if (node_routes.anchors.empty() || node_routes.generation != generation) {
        load_node_routes();
        node_routes.generation = generation;
    }
    // Every shard is locked here first, as Citus locks the shards of its own writes on the
    // coordinator before it reaches the nodes: a move waits for this transaction here, before it
    // locks anything on a node, so a move and a call never wait for each other crosswise. A move
    // that committed before the locks changed the metadata: route anew (once is enough, the
    // locks now hold every shard in place).
    {
        AsExtensionOwner owner;
        lock_shards_here(node_routes.shards);
    }
    if (distributed() && node_routes.generation != citus_metadata_generation()) {
        load_node_routes();
        node_routes.generation = citus_metadata_generation();
    }
    return node_routes.anchors;
}

int64_t coordinator_lease_token() {
    if (in_node_scope() && shard_scope_token() > 0) return shard_scope_token();
    static CachedPlan plan("SELECT pg_catalog.nextval('whizbang.wh_lease_token_seq')", {});
    plan.execute({});
    bool isnull = false;
    return DatumGetInt64(spi_value(0, 1, &isnull));
}

namespace {

// Whether whizbang._on_shard takes p_shard_anchors (0.11.0): a library newer than the
// extension's SQL (installed, not yet ALTER EXTENSION ... UPDATEd) keeps routing the 0.10.0 way.
// Dropped with any change of pg_proc, so an update in another session is seen at once.
bool shard_anchors_known = false;
bool shard_anchors_taken = false;
void forget_on_shard(Datum, int, uint32) { shard_anchors_known = false; }

// The routed calls' statements, prepared once per backend and kept: one per text and argument
// types (a function, its arguments, local or through Citus), at most kRoutedPlans (then all are
// freed and prepared anew as they come).
constexpr std::size_t kRoutedPlans = 64;
std::map<std::string, SPIPlanPtr> routed_plans;

SPIPlanPtr routed_plan(const std::string& sql, const std::vector<Oid>& types) {
    std::string key = sql;
    for (Oid t : types) key += "|" + std::to_string(t);
    auto it = routed_plans.find(key);
    if (it != routed_plans.end()) return it->second;
    if (routed_plans.size() >= kRoutedPlans) {
        pg_call([&] {
            for (auto& [k, p] : routed_plans) SPI_freeplan(p);
        });
        routed_plans.clear();
    }
    SPIPlanPtr plan = pg_call([&] {
        SPIPlanPtr p = SPI_prepare(sql.c_str(), static_cast<int>(types.size()), const_cast<Oid*>(types.data()));
        if (p == nullptr) elog(ERROR, "whizbang: could not prepare a routed call: %s", SPI_result_code_string(SPI_result));
        SPI_keepplan(p);
        return p;
    });
    routed_plans.emplace(std::move(key), plan);
    return plan;
}

bool on_shard_takes_shard_anchors() {
    static bool registered = false;
    pg_call([&] {
        if (!registered) {
            CacheRegisterSyscacheCallback(PROCOID, forget_on_shard, (Datum)0);
            registered = true;
        }
        if (shard_anchors_known) return;
        Oid ns = get_namespace_oid("whizbang", false);
        CatCList* list = SearchSysCacheList1(PROCNAMEARGSNSP, CStringGetDatum("_on_shard"));
        shard_anchors_taken = false;
        for (int i = 0; i < list->n_members; ++i) {
            Form_pg_proc proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(&list->members[i]->tuple));
            if (proc->pronamespace == ns && proc->pronargs >= 6) shard_anchors_taken = true;
        }
        ReleaseSysCacheList(list);
        shard_anchors_known = true;
    });
    return shard_anchors_taken;
}

}  // namespace

uint64 routed_call(int partition, const char* function, const std::vector<Oid>& types,
                   const std::vector<Datum>& values, const std::vector<char>& nulls, int64_t token,
                   const std::vector<int>* row_partitions, const std::vector<int>* shard_anchors) {
    // The no-op DELETE in the WITH clause makes Citus count the node as written to, so a
    // transaction that reaches two nodes commits with PREPARE TRANSACTION on both (a plain
    // router SELECT would be committed node by node). It deletes nothing: no row has a NULL
    // partition number. The whole query goes to the one node of the partition's shard, where
    // wh_partitions is the shard's, and the LATERAL call runs there. The LEFT JOIN answers one
    // row even when the call answers none (wb_answered NULL), so a missing routing row (no row
    // at all) is an error, never a call that silently did nothing.
    // On a node (a node call) the part runs right here, in the shard scope of its partition:
    // no Citus, no round trip.
    const bool local = in_node_scope();
    const std::string token_param = "$" + std::to_string(values.size() + 2);
    const std::string partitions_param = "$" + std::to_string(values.size() + 3);
    std::string sql = local ? "SELECT r.* FROM whizbang."
                            : "WITH w AS (DELETE FROM whizbang.wh_partitions x"
                              " WHERE x.partition_number OPERATOR(pg_catalog.=) $1 AND x.partition_number IS NULL"
                              " RETURNING 1)"
                              " SELECT r.* FROM whizbang.wh_partitions a LEFT JOIN LATERAL (SELECT f.*, true AS wb_answered"
                              " FROM whizbang.";
    sql += function;
    const bool with_shard_anchors = !local && on_shard_takes_shard_anchors();
    const std::string shard_anchors_param = with_shard_anchors ? ", $" + std::to_string(values.size() + 4) : "";
    sql += local ? "(whizbang._on_shard($1, $2, " + token_param + ", false)"
                 : "(whizbang._on_shard(a.partition_number, $2, " + token_param + ", true, " + partitions_param +
                       shard_anchors_param + ")";
    for (std::size_t i = 1; i < values.size(); ++i) sql += ", $" + std::to_string(i + 2);
    sql += local ? ") AS r" : ") AS f) AS r ON true WHERE a.partition_number OPERATOR(pg_catalog.=) $1";

    std::vector<Oid> all_types{INT4OID};
    all_types.insert(all_types.end(), types.begin(), types.end());
    std::vector<Datum> all_values{Int32GetDatum(partition)};
    all_values.insert(all_values.end(), values.begin(), values.end());
    std::string all_nulls(1, ' ');
    for (char n : nulls) all_nulls += n == 'n' ? 'n' : ' ';
    all_types.push_back(INT8OID);
    all_values.push_back(Int64GetDatum(token));
    all_nulls += token > 0 ? ' ' : 'n';
    if (!local) {
        all_types.push_back(INT4ARRAYOID);
        all_values.push_back(row_partitions ? int4_array(*row_partitions) : (Datum)0);
        all_nulls += row_partitions ? ' ' : 'n';
        // A fan-out's call of a node (its anchor): the node's shards as routed here.
        // Also when the routing has gone stale since: the node checks each shard under its lock.
        auto shards = node_routes.shard_anchors.find(partition);
        const std::vector<int>* anchors =
            shard_anchors                                                          ? shard_anchors
            : shards != node_routes.shard_anchors.end() && !row_partitions ? &shards->second
                                                                                   : nullptr;
        if (with_shard_anchors) {
            all_types.push_back(INT4ARRAYOID);
            all_values.push_back(anchors ? int4_array(*anchors) : (Datum)0);
            all_nulls += anchors ? ' ' : 'n';
        }
    }
    // The caller's privileges were checked once, here on the coordinator: PostgreSQL checked
    // EXECUTE on the whizbang function it called, and its entry what the function needs of the
    // tables, from the table one server checks too (pg/boundary/required_privileges.h). The
    // router query, the connections Citus opens for it (per user) and the code on the nodes then
    // run as the owner, so an application role needs no privilege on the nodes, none on the
    // routing rows (wh_partitions) and none on whizbang._on_shard, which alone can choose a
    // node's lease token.
    std::optional<AsExtensionOwner> owner;
    if (!local) owner.emplace();
    try {
        SPIPlanPtr plan = routed_plan(sql, all_types);
        const uint64 rows = pg_call([&] {
            int rc = SPI_execute_plan(plan, all_values.data(), all_nulls.c_str(), false, 0);
            if (rc != SPI_OK_SELECT)
                elog(ERROR, "whizbang: routed call of %s failed: %s", function, SPI_result_code_string(rc));
            return SPI_processed;
        });
        if (local) return rows;
        if (rows == 0)
            throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                           "whizbang: partition " + std::to_string(partition) + " has no routing row",
                           "whizbang.wh_partitions must hold one row for each partition 0 to 9999; without it "
                           "a call for the partition reaches no node. Nothing was written.",
                           "whizbang.check() lists the missing rows; restore them with "
                           "INSERT INTO whizbang.wh_partitions SELECT g FROM pg_catalog.generate_series(0, 9999) g "
                           "ON CONFLICT DO NOTHING.");
        if (rows == 1) {
            bool isnull = false;
            (void)spi_value(0, SPI_tuptable->tupdesc->natts, &isnull);
            if (isnull) return 0;  // the call answered no row
        }
        return rows;
    } catch (...) {
        // A routed part that failed may have found its shard moved: route anew next time.
        forget_citus_routing();
        throw;
    }
}

std::optional<uint64> routed_call_if_reachable(int partition, const char* function, const std::vector<Oid>& types,
                                              const std::vector<Datum>& values, const std::vector<char>& nulls,
                                              int64_t token) {
    uint64 rows = 0;
    // Citus reports a node it cannot reach as connection_failure (class 08).
    if (!in_subtransaction([&] { rows = routed_call(partition, function, types, values, nulls, token); },
                           [](int code) { return ERRCODE_TO_CATEGORY(code) == ERRCODE_CONNECTION_EXCEPTION; }))
        return std::nullopt;
    return rows;
}

int routed_count(int partition, const char* function, const std::vector<Oid>& types,
                 const std::vector<Datum>& values, const std::vector<char>& nulls,
                 const std::vector<int>* row_partitions) {
    if (routed_call(partition, function, types, values, nulls, 0, row_partitions) != 1)
        throw SqlError(ERRCODE_INTERNAL_ERROR, std::string("whizbang: a node did not answer the count of ") + function);
    bool isnull = false;
    Datum count = spi_value(0, 1, &isnull);
    return isnull ? 0 : DatumGetInt32(count);
}

std::vector<Oid> argument_types(FunctionCallInfo fcinfo) {
    const int nargs = PG_NARGS();
    std::vector<Oid> types(nargs);
    pg_call([&] {
        for (int i = 0; i < nargs; ++i) types[i] = get_fn_expr_argtype(fcinfo->flinfo, i);
    });
    for (Oid t : types)
        if (!OidIsValid(t)) throw SqlError(ERRCODE_INTERNAL_ERROR, "whizbang: a routed call needs its argument types");
    return types;
}

Datum slice_array(Datum array, const std::vector<std::size_t>& positions) {
    return pg_call([&] {
        ArrayType* a = DatumGetArrayTypeP(array);
        const Oid element = ARR_ELEMTYPE(a);
        int16 length = 0;
        bool byval = false;
        char align = 0;
        get_typlenbyvalalign(element, &length, &byval, &align);
        Datum* values = nullptr;
        bool* nulls = nullptr;
        int n = 0;
        deconstruct_array(a, element, length, byval, align, &values, &nulls, &n);
        Datum* out = static_cast<Datum*>(palloc(sizeof(Datum) * (positions.size() + 1)));
        bool* out_nulls = static_cast<bool*>(palloc(sizeof(bool) * (positions.size() + 1)));
        for (std::size_t k = 0; k < positions.size(); ++k) {
            if (positions[k] >= static_cast<std::size_t>(n)) elog(ERROR, "whizbang: a routed array is too short");
            out[k] = values[positions[k]];
            out_nulls[k] = nulls[positions[k]];
        }
        int dims[1] = {static_cast<int>(positions.size())};
        int lbs[1] = {1};
        return PointerGetDatum(construct_md_array(out, out_nulls, 1, dims, lbs, element, length, byval, align));
    });
}

RoutedRow copy_routed_row(uint64 r, TupleDesc desc, std::size_t position) {
    if (desc->natts > kMaxRoutedColumns) throw SqlError(ERRCODE_INTERNAL_ERROR, "whizbang: a routed call returns too many columns");
    RoutedRow row;
    row.position = position;
    pg_call([&] {
        for (int c = 0; c < desc->natts; ++c) {
            Datum v = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, c + 1, &row.nulls[c]);
            Form_pg_attribute att = TupleDescAttr(desc, c);
            row.values[c] = row.nulls[c] ? (Datum)0 : SPI_datumTransfer(v, att->attbyval, att->attlen);
        }
    });
    return row;
}

void put_in_order(ReturnSetInfo* rsinfo, std::vector<RoutedRow>& rows) {
    std::stable_sort(rows.begin(), rows.end(),
                     [](const RoutedRow& a, const RoutedRow& b) { return a.position < b.position; });
    pg_call([&] {
        for (RoutedRow& row : rows) tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row.values, row.nulls);
    });
}

std::vector<RoutedRow> call_on_every_shard(FunctionCallInfo fcinfo, const char* function) {
    const std::vector<Oid> types = argument_types(fcinfo);
    std::vector<Datum> values;
    std::vector<char> nulls;
    caller_arguments(fcinfo, values, nulls);
    TupleDesc desc = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo)->setDesc;
    std::vector<RoutedRow> out;
    for (int anchor : routing_anchors()) {
        uint64 rows = routed_call(anchor, function, types, values, nulls);
        for (uint64 r = 0; r < rows; ++r) out.push_back(copy_routed_row(r, desc, out.size()));
    }
    return out;
}

void require_distributed_partition_count(int count) {
    if (count > kDistributedPartitionCount)
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                       "p_partition_count must be at most " + std::to_string(kDistributedPartitionCount) +
                           " on a distributed install, not " + std::to_string(count),
                       "wh_partitions routes partitions 0 to 9999 (docs/scaleout.md).");
}

}  // namespace whizbang::pg

using namespace whizbang::pg;

// _on_shard(p_partition integer, p_value anyelement, p_token bigint, p_node boolean,
// p_partitions integer[], p_shard_anchors integer[]) RETURNS anyelement: the first argument of a routed call (citus_route.h). Returns p_value; the next
// whizbang function called runs in the shard scope of p_partition (shard_scope.h), or, with
// p_node, for the whole node, handing out p_token if it leases.
WB_ROUTED_FUNCTION(wb_on_shard, local) {
    if (PG_ARGISNULL(0)) throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "p_partition must not be NULL");
    std::vector<int> partitions, shard_anchors;
    if (PG_NARGS() > 4 && !PG_ARGISNULL(4)) partitions = int4_array_values(PG_GETARG_DATUM(4));
    if (PG_NARGS() > 5 && !PG_ARGISNULL(5)) shard_anchors = int4_array_values(PG_GETARG_DATUM(5));
    set_pending_shard(PG_GETARG_INT32(0), PG_NARGS() > 2 && !PG_ARGISNULL(2) ? PG_GETARG_INT64(2) : 0,
                      PG_NARGS() > 3 && !PG_ARGISNULL(3) && PG_GETARG_BOOL(3), std::move(partitions),
                      std::move(shard_anchors));
    if (PG_ARGISNULL(1)) PG_RETURN_NULL();
    PG_RETURN_DATUM(PG_GETARG_DATUM(1));
}
