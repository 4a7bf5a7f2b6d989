#include <algorithm>
#include <string>

#include "core/partition.h"
#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/citus/citus_route.h"
#include "pg/citus/message_route.h"
#include "pg/citus/shard_scope.h"
#include "pg/boundary/spi.h"

extern "C" {
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/lsyscache.h"
}

namespace whizbang::pg {
namespace {

// The elements at `positions` (0-based, in order) of the jsonb array `batch`, as a new array.
Datum sub_batch(Datum batch, const std::vector<std::size_t>& positions) {
    std::vector<int64_t> ordinals;
    for (std::size_t p : positions) ordinals.push_back(static_cast<int64_t>(p) + 1);
    Datum wanted = int8_array(ordinals);
    static CachedPlan split("SELECT pg_catalog.jsonb_agg(e.value ORDER BY e.ordinality)"
                            "  FROM pg_catalog.jsonb_array_elements($1) WITH ORDINALITY AS e"
                            " WHERE e.ordinality OPERATOR(pg_catalog.=) ANY ($2)",
                            {JSONBOID, INT8ARRAYOID});
    if (split.execute({batch, wanted}) != 1) throw SqlError(ERRCODE_INTERNAL_ERROR, "whizbang: could not split the batch");
    bool isnull = false;
    Datum part = spi_value(0, 1, &isnull);
    return pg_call([&] { return SPI_datumTransfer(part, false, -1); });
}

}  // namespace

std::size_t route_messages(FunctionCallInfo fcinfo, const char* function, const std::vector<Message>& messages,
                           int partition_count, RoutedRows mode) {
    require_distributed_partition_count(partition_count);
    const int nargs = PG_NARGS();
    const std::vector<Oid> types = argument_types(fcinfo);

    SpiConnection spi;
    std::vector<int> partitions(messages.size());
    for (std::size_t i = 0; i < messages.size(); ++i)
        partitions[i] = core::partition_of(messages[i].stream_id.value_or(messages[i].id), partition_count);
    std::vector<RoutedRow> out;
    std::size_t created = 0;
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    TupleDesc desc = rsinfo->setDesc;
    // A pre-leasing store (p_instance_id): one token for the call, as on one server.
    const int64_t token = nargs > 1 && !PG_ARGISNULL(1) && types[1] == UUIDOID ? coordinator_lease_token() : 0;
    for (const auto& [shard, positions] : routing_groups(partitions)) {
        std::vector<Datum> values;
        std::vector<char> nulls;
        caller_arguments(fcinfo, values, nulls);
        values[0] = sub_batch(PG_GETARG_DATUM(0), positions);
        uint64 rows = routed_call(partitions[positions.front()], function, types, values, nulls, token);
        // Every part answers one row per message it was sent, also where the caller wants new
        // messages only (a part's store_inbox_messages answers all, flagged): a part that answers
        // fewer was not heard in full, which is an error, never a message taken for a duplicate.
        if (rows != positions.size())
            throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                           "whizbang: the node of partition " + std::to_string(partitions[positions.front()]) +
                               " answered " + std::to_string(rows) + " rows for " + std::to_string(positions.size()) +
                               " messages of shard " + std::to_string(shard),
                           "Nothing of the call was written.", "whizbang.check() reports the routing state.");
        for (uint64 r = 0; r < rows; ++r) {
            RoutedRow row = copy_routed_row(r, desc, positions[r]);
            bool is_new = false;
            if (!row.nulls[2])
                is_new = TupleDescAttr(desc, 2)->atttypid == BOOLOID ? DatumGetBool(row.values[2])
                                                                      : text_from_datum(row.values[2]) == "new";
            if (is_new) ++created;
            // New only: the coordinator keeps the new rows; a node call hands all to it.
            if (mode == RoutedRows::one_per_input || is_new || in_node_scope()) out.push_back(row);
        }
    }
    spi.finish();
    put_in_order(rsinfo, out);
    return created;
}

}  // namespace whizbang::pg
