#include "pg/boundary/arrays.h"  // before any PostgreSQL header: it includes src/core
#include "pg/citus/shard_scope.h"

#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "pg/boundary/args.h"
#include "pg/boundary/spi.h"
#include "pg/citus/distributed.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "storage/lockdefs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
}

namespace whizbang::pg {
namespace {

// The shard ids of whizbang's Citus tables for one partition: table name -> shard id.
struct Scope {
    int partition = -1;
    int64_t token = 0;
    bool node = false;  // a node call: no shard of its own (in_node_scope)
    std::vector<int> partitions;  // a node call's partitions of the rows it names
    std::vector<int> shard_anchors;  // a fan-out node call's shards, one partition each
    std::map<std::string, int64_t> shards;
    std::string key;  // names the shards, for plans kept per scope (spi.cpp)
};

// _on_shard() sets `pending`; the next whizbang entry takes it (ShardScopeEntry). A scope left
// pending by a call that never came is dropped at the end of the transaction.
struct Pending {
    int partition;
    int64_t token;
    bool node;
    std::vector<int> partitions;
    std::vector<int> shard_anchors;
};
std::optional<Pending> pending;
std::vector<Scope> active;  // innermost last
void forget_pending(XactEvent event) {
    if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT || event == XACT_EVENT_PREPARE ||
        event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PARALLEL_COMMIT)
        pending.reset();
}

// The latest committed word of Citus's metadata (not the transaction's snapshot, which under
// REPEATABLE READ predates a move that committed while this call waited for its lock): does
// `shard` have a placement in this node's group? Catalog scans, no SPI: runs on the PostgreSQL
// side, under the shard's metadata lock.
bool placement_is_local_unguarded(int64 shard) {
    Oid placement_rel = get_relname_relid("pg_dist_placement", PG_CATALOG_NAMESPACE);
    Oid group_rel = get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE);
    if (!OidIsValid(placement_rel) || !OidIsValid(group_rel)) return false;
    Snapshot latest = RegisterSnapshot(GetLatestSnapshot());
    int32 group = -1;
    {
        Relation rel = table_open(group_rel, AccessShareLock);
        SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, latest, 0, nullptr);
        HeapTuple tuple = systable_getnext(scan);
        bool isnull = true;
        // pg_dist_local_group(groupid int4): one row.
        if (HeapTupleIsValid(tuple)) {
            Datum d = heap_getattr(tuple, 1, RelationGetDescr(rel), &isnull);
            if (!isnull) group = DatumGetInt32(d);
        }
        systable_endscan(scan);
        table_close(rel, AccessShareLock);
    }
    bool found = false;
    {
        Relation rel = table_open(placement_rel, AccessShareLock);
        ScanKeyData key;
        // pg_dist_placement(placementid int8, shardid int8, shardstate int4, shardlength int8, groupid int4)
        ScanKeyInit(&key, 2, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(shard));
        SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, latest, 1, &key);
        for (HeapTuple tuple = systable_getnext(scan); HeapTupleIsValid(tuple) && !found; tuple = systable_getnext(scan)) {
            bool isnull = true;
            Datum g = heap_getattr(tuple, 5, RelationGetDescr(rel), &isnull);
            if (!isnull && DatumGetInt32(g) == group) found = true;
        }
        systable_endscan(scan);
        table_close(rel, AccessShareLock);
    }
    UnregisterSnapshot(latest);
    return found;
}

// Reads the shard of every whizbang Citus table for `partition` from Citus's metadata (synced
// to every node): the distributed tables' shard for the partition, the reference tables' one.
// The shards of each partition's scope, as load_scope read them, while Citus's metadata of the
// work tables is unchanged (distributed.h): a routed part does not query the catalog again.
struct ScopeShards {
    unsigned long generation = 0;
    std::unordered_map<int, std::map<std::string, int64_t>> by_partition;
};
ScopeShards scope_shards;

Scope load_scope(int partition) {
    Scope scope;
    scope.partition = partition;
    (void)distributed();  // takes pending invalidations in
    if (scope_shards.generation != citus_metadata_generation()) {
        scope_shards.by_partition.clear();
        scope_shards.generation = citus_metadata_generation();
    }
    if (auto known = scope_shards.by_partition.find(partition); known != scope_shards.by_partition.end()) {
        scope.shards = known->second;
        scope.key = std::to_string(scope.shards.at("wh_inbox"));
        lock_local_placement(scope.shards.at("wh_inbox"), partition);
        return scope;
    }
    // Filled on the PostgreSQL side in the caller's memory (SPI_palloc), read afterwards.
    uint64 count = 0;
    char** names = nullptr;
    int64* shards = nullptr;
    pg_call([&] {
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "whizbang: SPI_connect failed");
        Oid types[1] = {INT4OID};
        Datum values[1] = {Int32GetDatum(partition)};
        int rc = SPI_execute_with_args(
            "SELECT c.relname::pg_catalog.text,"
            "       CASE WHEN p.partmethod OPERATOR(pg_catalog.=) 'n'"
            "            THEN (SELECT s.shardid FROM pg_catalog.pg_dist_shard s"
            "                   WHERE s.logicalrelid OPERATOR(pg_catalog.=) p.logicalrelid)"
            "            ELSE pg_catalog.get_shard_id_for_distribution_column(p.logicalrelid, $1) END"
            "  FROM pg_catalog.pg_dist_partition p JOIN pg_catalog.pg_class c"
            "    ON c.oid OPERATOR(pg_catalog.=) p.logicalrelid"
            " WHERE c.relnamespace OPERATOR(pg_catalog.=) 'whizbang'::pg_catalog.regnamespace"
            "   AND (p.partmethod OPERATOR(pg_catalog.=) 'n' OR p.colocationid OPERATOR(pg_catalog.=)"
            "        (SELECT q.colocationid FROM pg_catalog.pg_dist_partition q"
            "          WHERE q.logicalrelid OPERATOR(pg_catalog.=) 'whizbang.wh_inbox'::pg_catalog.regclass))",
            1, types, values, nullptr, true, 0);
        if (rc != SPI_OK_SELECT) elog(ERROR, "whizbang: reading the shards of partition %d failed", partition);
        names = static_cast<char**>(SPI_palloc(sizeof(char*) * (SPI_processed + 1)));
        shards = static_cast<int64*>(SPI_palloc(sizeof(int64) * (SPI_processed + 1)));
        for (uint64 r = 0; r < SPI_processed; ++r) {
            bool n1 = false, n2 = false;
            Datum name = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 1, &n1);
            Datum shard = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 2, &n2);
            if (n1 || n2) continue;
            char* relname = TextDatumGetCString(name);
            names[count] = static_cast<char*>(SPI_palloc(strlen(relname) + 1));
            strcpy(names[count], relname);
            shards[count] = DatumGetInt64(shard);
            ++count;
        }
        SPI_finish();
    });
    for (uint64 i = 0; i < count; ++i) scope.shards[names[i]] = shards[i];
    pg_call([&] {
        for (uint64 i = 0; i < count; ++i) pfree(names[i]);
        if (names) pfree(names);
        if (shards) pfree(shards);
    });
    if (scope.shards.count("wh_inbox") == 0)
        throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                       "whizbang: a routed call found no distributed whizbang tables on this node");
    // Every whizbang distributed table but the idempotency keys is in one colocation group, and
    // Citus's metadata lock is per group and shard index: this one lock covers each shard the
    // call names (the keys' shards are locked where they are used, ShardTableOverride).
    lock_local_placement(scope.shards.at("wh_inbox"), partition);
    if (scope_shards.by_partition.size() >= static_cast<std::size_t>(kDistributedPartitionCount))
        scope_shards.by_partition.clear();
    scope_shards.by_partition[partition] = scope.shards;
    scope.key = std::to_string(scope.shards.at("wh_inbox"));
    return scope;
}

bool identifier_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || (c >= 'A' && c <= 'Z');
}

// The single-server keys (message_id, consumer), (stream_id, consumer), (message_id) are
// (..., partition_number) on a distributed install: an ON CONFLICT naming the former names the
// latter on a shard.
const std::pair<const char*, const char*> kConflictTargets[] = {
    {"ON CONFLICT (consumer, message_id)", "ON CONFLICT (consumer, message_id, partition_number)"},
    {"ON CONFLICT (stream_id, consumer)", "ON CONFLICT (stream_id, consumer, partition_number)"},
    {"ON CONFLICT (message_id)", "ON CONFLICT (message_id, partition_number)"},
};

}  // namespace

namespace {

// Citus's shard metadata locks of `shards` in ShareLock mode, the mode of Citus's own writes
// (its executor's AcquireMetadataLocks); moves, splits and rebalances take ExclusiveLock on every
// node with metadata (BlockWritesToShardList). Through Citus's lock_shard_metadata, called
// directly (not planned). PostgreSQL side of the boundary.
void lock_shard_metadata_unguarded(ArrayType* shards) {
    static Oid lock_function = InvalidOid;
    if (!OidIsValid(lock_function)) {
        Oid args[2] = {INT4OID, INT8ARRAYOID};
        lock_function = LookupFuncName(list_make2(makeString(pstrdup("pg_catalog")),
                                                  makeString(pstrdup("lock_shard_metadata"))),
                                       2, args, false);
    }
    OidFunctionCall2(lock_function, Int32GetDatum(ShareLock), PointerGetDatum(shards));
}

}  // namespace

void lock_shards_here(const std::vector<int64_t>& shards) {
    if (shards.empty()) return;
    Datum array = int8_array(shards);
    pg_call([&] {
        lock_shard_metadata_unguarded(DatumGetArrayTypeP(array));
        // A move that committed while this waited changed the metadata: take its invalidation in.
        AcceptInvalidationMessages();
    });
}

void lock_local_placement(int64_t shard, int partition) {
    const bool local = pg_call([&] {
        Datum element = Int64GetDatum(shard);
        lock_shard_metadata_unguarded(
            construct_array(&element, 1, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
        return placement_is_local_unguarded(shard);
    });
    if (local) return;
    forget_citus_routing();
    throw SqlError(ERRCODE_T_R_SERIALIZATION_FAILURE,
                   "whizbang: shard " + std::to_string(shard) +
                       (partition >= 0 ? " (partition " + std::to_string(partition) + ")" : std::string()) +
                       " is not placed on this node any more",
                   "A shard move, split or rebalance moved it after the call was routed; nothing was written.",
                   "Retry the transaction: the next call routes to the shard's new placement.");
}

const std::string& shard_scope_key() {
    static const std::string none;
    return in_shard_scope() ? active.back().key : none;
}

bool in_shard_scope() { return !active.empty() && !active.back().node; }

bool in_node_scope() { return !active.empty() && active.back().node; }

int64_t shard_scope_token() { return active.empty() ? 0 : active.back().token; }

std::string shard_sql(const std::string& sql) {
    if (!in_shard_scope()) return sql;
    const Scope& scope = active.back();
    static const std::string prefix = "whizbang.";
    std::string out;
    out.reserve(sql.size() + 64);
    std::size_t i = 0;
    while (i < sql.size()) {
        std::size_t at = sql.find(prefix, i);
        if (at == std::string::npos) {
            out.append(sql, i, std::string::npos);
            break;
        }
        std::size_t end = at + prefix.size();
        while (end < sql.size() && identifier_char(sql[end])) ++end;
        std::string name = sql.substr(at + prefix.size(), end - at - prefix.size());
        out.append(sql, i, at - i);
        out += prefix;
        out += name;
        auto it = scope.shards.find(name);
        if (it != scope.shards.end()) out += "_" + std::to_string(it->second);
        i = end;
    }
    // The distribution column, which a single server's tables may not have yet (a database at an
    // older version served by this library): written as /*+SHARD ...*/, a comment there.
    for (std::size_t at = out.find("/*+SHARD"); at != std::string::npos; at = out.find("/*+SHARD", at)) {
        const std::size_t end = out.find("*/", at);
        if (end == std::string::npos) break;
        out = out.substr(0, at) + out.substr(at + 8, end - at - 8) + out.substr(end + 2);
    }
    for (const auto& [from, to] : kConflictTargets) {
        std::size_t at = out.find(from);
        if (at != std::string::npos) out.replace(at, std::strlen(from), to);
    }
    return out;
}

Oid whizbang_relid_unguarded(const char* name) {
    Oid ns = get_namespace_oid("whizbang", false);
    if (active.empty() || active.back().node) return get_relname_relid(name, ns);
    // No C++ allocation here: callers run this on the PostgreSQL side of the boundary.
    const Scope& scope = active.back();
    const std::pair<const std::string, int64_t>* best = nullptr;
    const std::size_t length = strlen(name);
    for (const auto& entry : scope.shards) {
        const std::size_t n = entry.first.size();
        if (n <= length && strncmp(name, entry.first.c_str(), n) == 0 && (name[n] == '\0' || name[n] == '_') &&
            (best == nullptr || n > best->first.size()))
            best = &entry;
    }
    if (best == nullptr) return get_relname_relid(name, ns);
    char* shard = psprintf("%s_" INT64_FORMAT, name, best->second);
    Oid relid = get_relname_relid(shard, ns);
    pfree(shard);
    return relid;
}

Oid whizbang_relid(const char* name) {
    return pg_call([&] { return whizbang_relid_unguarded(name); });
}

namespace {

// The first column (int8) of every row `plan` answers for `values`, on an SPI connection of its own.
std::vector<int64_t> int8_column(CachedPlan& plan, const std::vector<Datum>& values) {
    SpiConnection spi;
    const uint64 rows = plan.execute(values);
    std::vector<int64_t> out;
    out.reserve(rows);
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        out.push_back(DatumGetInt64(spi_value(r, 1, &isnull)));
    }
    spi.finish();
    return out;
}

}  // namespace

std::vector<int64_t> local_shards(const char* table) {
    // This node's placements: its group (pg_dist_local_group).
    static CachedPlan plan(
        "SELECT s.shardid FROM pg_catalog.pg_dist_shard s JOIN pg_catalog.pg_dist_placement p"
        "    ON p.shardid OPERATOR(pg_catalog.=) s.shardid"
        " WHERE s.logicalrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)"
        "   AND p.groupid OPERATOR(pg_catalog.=) (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)"
        " ORDER BY s.shardid",
        {TEXTOID});
    return int8_column(plan, {text_datum(std::string("whizbang.") + table)});
}

std::vector<int64_t> shards_of_partitions(const std::vector<int>& partitions, const char* table) {
    if (partitions.empty()) return {};
    static CachedPlan plan(
        "SELECT pg_catalog.get_shard_id_for_distribution_column(pg_catalog.to_regclass($1), u.p)"
        "  FROM pg_catalog.unnest($2) WITH ORDINALITY AS u(p, i) ORDER BY u.i",
        {TEXTOID, INT4ARRAYOID});
    std::vector<int64_t> shards = int8_column(plan, {text_datum(std::string("whizbang.") + table), int4_array(partitions)});
    if (shards.size() != partitions.size())
        throw SqlError(ERRCODE_INTERNAL_ERROR, "whizbang: could not find the shards of " + std::to_string(partitions.size()) +
                                                   " partitions");
    return shards;
}

std::vector<int64_t> idempotency_shards_of_first_local_shard() {
    if (!in_shard_scope()) return {};
    const std::vector<int64_t> work = local_shards("wh_inbox");
    if (work.empty() || work.front() != active.back().shards.at("wh_inbox")) return {};
    return local_shards("wh_idempotency_keys");
}

ShardTableOverride::ShardTableOverride(const char* table, int64_t shard) {
    lock_local_placement(shard, -1);
    Scope scope = active.empty() ? Scope{} : active.back();
    scope.shards[table] = shard;
    scope.key += std::string("/") + table + "=" + std::to_string(shard);
    active.push_back(std::move(scope));
}

ShardTableOverride::~ShardTableOverride() {
    if (!active.empty()) active.pop_back();
}

bool enter_shard_scope() {
    if (!pending) return false;
    const Pending p = *pending;
    pending.reset();
    Scope scope;
    if (p.node) {
        scope.partition = p.partition;
        scope.node = true;
        scope.partitions = p.partitions;
        scope.shard_anchors = p.shard_anchors;
    } else {
        scope = load_scope(p.partition);
    }
    scope.token = p.token;
    active.push_back(std::move(scope));
    return true;
}

void leave_shard_scope() {
    if (!active.empty()) active.pop_back();
}

const std::vector<int>& node_scope_partitions() {
    static const std::vector<int> none;
    return in_node_scope() ? active.back().partitions : none;
}

void set_pending_shard(int partition, int64_t token, bool node, std::vector<int> partitions,
                       std::vector<int> shard_anchors) {
    pending = Pending{partition, token, node, std::move(partitions), std::move(shard_anchors)};
}

const std::vector<int>& node_scope_shard_anchors() {
    static const std::vector<int> none;
    return in_node_scope() ? active.back().shard_anchors : none;
}

void shard_scope_at_xact(XactEvent event) { forget_pending(event); }

}  // namespace whizbang::pg
