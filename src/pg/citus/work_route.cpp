#include <cstring>
#include <map>
#include <optional>

#include "core/partition.h"
#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/boundary/owner.h"
#include "pg/citus/citus_route.h"
#include "pg/citus/claim_memory.h"
#include "pg/citus/shard_scope.h"
#include "pg/boundary/spi.h"
#include "pg/citus/work_route.h"
#include "pg/boundary/required_privileges.h"

extern "C" {
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/lsyscache.h"
}

namespace whizbang::pg {
namespace {

CachedPlan partitions_plan[2] = {
    CachedPlan("SELECT w.message_id, w.partition_number FROM whizbang.wh_inbox w"
               " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($1) AND w.consumer OPERATOR(pg_catalog.=) $2",
               {UUIDARRAYOID, TEXTOID}),
    CachedPlan("SELECT w.message_id, w.partition_number FROM whizbang.wh_outbox w"
               " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($1) AND w.consumer OPERATOR(pg_catalog.=) $2",
               {UUIDARRAYOID, TEXTOID}),
};

// A node call's look-up (where a query of the distributed table would be a distributed query
// inside one): the ids' work rows in this node's own shards, one statement over all of them.
uint64 find_on_this_node(Source source, const std::vector<core::Uuid>& ids, const std::string& consumer) {
    const char* table = source == Source::inbox ? "wh_inbox" : "wh_outbox";
    // The shards the coordinator routed here, each locked and checked before it is read: a
    // shard that moved away is an error, not a row reported not_found.
    std::vector<int64_t> shards;
    const std::vector<int> anchors = routing_anchors();
    std::vector<int64_t> work_shards = shards_of_partitions(anchors);
    for (std::size_t i = 0; i < anchors.size(); ++i) {
        lock_local_placement(work_shards[i], anchors[i]);
        shards.push_back(work_shards[i]);
    }
    if (source == Source::outbox) shards = shards_of_partitions(anchors, "wh_outbox");
    if (shards.empty()) return 0;
    std::string sql;
    for (int64_t shard : shards) {
        if (!sql.empty()) sql += " UNION ALL ";
        sql += std::string("SELECT w.message_id, w.partition_number FROM whizbang.") + table + "_" + std::to_string(shard) +
               " w WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($1) AND w.consumer OPERATOR(pg_catalog.=) $2";
    }
    Datum id_array = uuid_array(ids), consumer_datum = text_datum(consumer);
    return pg_call([&] {
        Oid types[2] = {UUIDARRAYOID, TEXTOID};
        Datum values[2] = {id_array, consumer_datum};
        int rc = SPI_execute_with_args(sql.c_str(), 2, types, values, nullptr, true, 0);
        if (rc != SPI_OK_SELECT) elog(ERROR, "whizbang: could not look up rows on this node");
        return SPI_processed;
    });
}

// The partition of each id's work row; an id with no row goes to its own id's partition (on a
// node: to one of the node's), whose shard answers for it as a single server would
// (not_found, ...). Needs an open SPI connection.
std::vector<int> partitions_of(Source source, const std::vector<core::Uuid>& ids, const std::string& consumer) {
    // A node call of a coordinator that knew every id's partition (claim_memory.h).
    if (const std::vector<int>& given = node_scope_partitions(); in_node_scope() && given.size() == ids.size())
        return given;
    std::map<core::Uuid, int> found;
    uint64 rows = in_node_scope()
                      ? find_on_this_node(source, ids, consumer)
                      : partitions_plan[static_cast<int>(source)].execute({uuid_array(ids), text_datum(consumer)});
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        core::Uuid id = uuid_from_datum(spi_value(r, 1, &isnull));
        found[id] = DatumGetInt32(spi_value(r, 2, &isnull));
    }
    const int elsewhere = in_node_scope() ? routing_anchors().front() : -1;
    std::vector<int> partitions(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        auto it = found.find(ids[i]);
        partitions[i] = it != found.end() ? it->second
                        : elsewhere >= 0 ? elsewhere
                                         : core::partition_of(ids[i], kDistributedPartitionCount);
    }
    return partitions;
}

// The caller's arguments for the part of the call at `positions`: every array argument (the
// ids and the arrays that go with them) cut down to those elements.
void part_arguments(FunctionCallInfo fcinfo, const std::vector<Oid>& types, const std::vector<std::size_t>& positions,
                    std::vector<Datum>& values, std::vector<char>& nulls) {
    caller_arguments(fcinfo, values, nulls);
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (nulls[i] == 'n') continue;
        if (OidIsValid(pg_call([&] { return get_element_type(types[i]); })))
            values[i] = slice_array(values[i], positions);
    }
}

// The partition of every id, when claims through this server (claim_memory.h) handed them all
// out; else none.
std::optional<std::vector<int>> claimed_partitions(Source source, const std::string& consumer,
                                                   const std::vector<core::Uuid>& ids) {
    std::vector<int> partitions;
    partitions.reserve(ids.size());
    for (const core::Uuid& id : ids) {
        std::optional<int> p = claimed_partition(source, consumer, id);
        if (!p) return std::nullopt;
        partitions.push_back(*p);
    }
    return partitions;
}

}  // namespace

void route_outcomes(FunctionCallInfo fcinfo, const char* function, Source source, const std::vector<core::Uuid>& ids,
                    const std::string& consumer) {
    if (ids.empty()) return;
    const std::vector<Oid> types = argument_types(fcinfo);
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    SpiConnection spi;
    if (!in_node_scope()) {
        // The caller's rights were checked by the entry, from the table one server checks too
        // (required_privileges.h); the nodes run as the owner.
        if (std::optional<std::vector<int>> known =
                claimed_partitions(source, source == Source::outbox ? std::string() : consumer, ids)) {
            // Every id was handed out by a claim through this server: to the nodes that hold them only.
            std::vector<RoutedRow> out;
            for (const auto& [node, positions] : routing_groups(*known)) {
                std::vector<Datum> values;
                std::vector<char> nulls;
                part_arguments(fcinfo, types, positions, values, nulls);
                std::vector<int> theirs;
                for (std::size_t i : positions) theirs.push_back((*known)[i]);
                uint64 rows = routed_call(theirs.front(), function, types, values, nulls, 0, &theirs);
                if (rows != positions.size())
                    throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                                   "whizbang: node " + std::to_string(node) + " answered " + std::to_string(rows) +
                                       " rows for " + std::to_string(positions.size()) + " ids",
                                   "Nothing of the call was written.", "whizbang.check() reports the routing state.");
                for (uint64 r = 0; r < rows; ++r) out.push_back(copy_routed_row(r, rsinfo->setDesc, positions[r]));
            }
            spi.finish();
            put_in_order(rsinfo, out);
            return;
        }
        // The coordinator: the whole call to every node, which looks its rows up in its own
        // shards (cheaper than a query Citus sends to every shard); per id, the answer of the
        // node that has the row, else not_found.
        std::vector<RoutedRow> best(ids.size());
        std::vector<char> answered(ids.size(), 0);
        std::vector<Datum> values;
        std::vector<char> nulls;
        std::vector<std::size_t> all(ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) all[i] = i;
        part_arguments(fcinfo, types, all, values, nulls);
        for (int anchor : routing_anchors()) {
            uint64 rows = routed_call(anchor, function, types, values, nulls);
            if (rows != ids.size())
                throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                               "whizbang: a node answered " + std::to_string(rows) + " rows for " +
                                   std::to_string(ids.size()) + " ids",
                               "Nothing of the call was written.", "whizbang.check() reports the routing state.");
            for (uint64 r = 0; r < rows; ++r) {
                bool isnull = false;
                const bool found = text_from_datum(spi_value(r, 2, &isnull)) != "not_found";
                if (answered[r] == 2 || (answered[r] == 1 && !found)) continue;
                best[r] = copy_routed_row(r, rsinfo->setDesc, r);
                answered[r] = found ? 2 : 1;
            }
        }
        spi.finish();
        put_in_order(rsinfo, best);
        return;
    }
    const std::vector<int> partitions = partitions_of(source, ids, consumer);
    std::vector<RoutedRow> out;
    for (const auto& [shard, positions] : routing_groups(partitions)) {
        std::vector<Datum> values;
        std::vector<char> nulls;
        part_arguments(fcinfo, types, positions, values, nulls);
        uint64 rows = routed_call(partitions[positions.front()], function, types, values, nulls);
        if (rows != positions.size())
            throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                           "whizbang: shard " + std::to_string(shard) + " answered " + std::to_string(rows) +
                               " rows for " + std::to_string(positions.size()) + " ids",
                           "Nothing of the call was written.", "whizbang.check() reports the routing state.");
        for (uint64 r = 0; r < rows; ++r) out.push_back(copy_routed_row(r, rsinfo->setDesc, positions[r]));
    }
    spi.finish();
    put_in_order(rsinfo, out);
}

int route_published(FunctionCallInfo fcinfo, const std::vector<core::Uuid>& ids) {
    if (ids.empty()) return 0;
    const std::vector<Oid> types = argument_types(fcinfo);
    SpiConnection spi;
    int done = 0;
    if (!in_node_scope()) {
        if (std::optional<std::vector<int>> known = claimed_partitions(Source::outbox, "", ids)) {
            // Every id was handed out by a claim through this server: to the nodes that hold them only.
            for (const auto& [node, positions] : routing_groups(*known)) {
                std::vector<core::Uuid> mine;
                std::vector<int> theirs;
                for (std::size_t i : positions) {
                    mine.push_back(ids[i]);
                    theirs.push_back((*known)[i]);
                }
                std::vector<Datum> values{uuid_array(mine), PG_ARGISNULL(1) ? (Datum)0 : PG_GETARG_DATUM(1)};
                std::vector<char> nulls{' ', PG_ARGISNULL(1) ? 'n' : ' '};
                done += routed_count(theirs.front(), "complete_outbox_published", types, values, nulls, &theirs);
            }
            spi.finish();
            return done;
        }
        // The coordinator: the ids to every node; each completes those in its shards.
        std::vector<Datum> values{uuid_array(ids), PG_ARGISNULL(1) ? (Datum)0 : PG_GETARG_DATUM(1)};
        std::vector<char> nulls{' ', PG_ARGISNULL(1) ? 'n' : ' '};
        for (int anchor : routing_anchors())
            done += routed_count(anchor, "complete_outbox_published", types, values, nulls);
        spi.finish();
        return done;
    }
    const std::vector<int> partitions = partitions_of(Source::outbox, ids, "");
    for (const auto& [shard, positions] : routing_groups(partitions)) {
        // The caller's p_ids may hold NULLs and repeats: the part gets the distinct ids it owns.
        std::vector<core::Uuid> mine;
        for (std::size_t i : positions) mine.push_back(ids[i]);
        std::vector<Datum> values{uuid_array(mine), PG_ARGISNULL(1) ? (Datum)0 : PG_GETARG_DATUM(1)};
        std::vector<char> nulls{' ', PG_ARGISNULL(1) ? 'n' : ' '};
        done += routed_count(partitions[positions.front()], "complete_outbox_published", types, values, nulls);
    }
    spi.finish();
    return done;
}

int route_dead_letter_retry(FunctionCallInfo fcinfo, const std::vector<int64_t>& ids) {
    static CachedPlan holders("SELECT d.dead_letter_id, d.partition_number, d.source FROM whizbang.wh_dead_letters d"
                              " WHERE d.dead_letter_id OPERATOR(pg_catalog.=) ANY ($1)",
                              {INT8ARRAYOID});
    const std::vector<Oid> types = argument_types(fcinfo);
    SpiConnection spi;
    std::vector<int64_t> found_ids;
    std::vector<int> partitions;
    if (const std::vector<int>& given = node_scope_partitions(); in_node_scope() && given.size() == ids.size()) {
        found_ids = ids;
        partitions = given;
    } else {
        // Read as the owner, like the routed parts: the caller's SELECT on wh_dead_letters was
        // checked by the entry, and a read as the caller could not see placements that the owner's
        // routed work changed earlier in this transaction (Citus refuses that: 25001).
        const Datum wanted = int8_array(ids);
        uint64 rows = 0;
        {
            AsExtensionOwner owner;
            rows = holders.execute({wanted});
        }
        CallShape found;
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false;
            found_ids.push_back(DatumGetInt64(spi_value(r, 1, &isnull)));
            partitions.push_back(DatumGetInt32(spi_value(r, 2, &isnull)));
            (text_from_datum(spi_value(r, 3, &isnull)) == "inbox" ? found.inbox : found.outbox) = true;
        }
        // What storing them back needs of the caller, as one server checks it (the nodes run as
        // the owner).
        if (!in_node_scope()) require_privileges("retry_dead_letters", found);
    }
    int done = 0;
    for (const auto& [shard, positions] : routing_groups(partitions)) {
        std::vector<int64_t> mine;
        std::vector<int> their_partitions;
        for (std::size_t i : positions) {
            mine.push_back(found_ids[i]);
            their_partitions.push_back(partitions[i]);
        }
        done += routed_count(partitions[positions.front()], "retry_dead_letters", types, {int8_array(mine)}, {' '},
                             &their_partitions);
    }
    spi.finish();
    return done;
}

}  // namespace whizbang::pg
