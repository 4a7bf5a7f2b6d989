#include <algorithm>
#include <string>

#include "core/partition.h"
#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/citus/citus_route.h"
#include "pg/citus/message_route.h"
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
    return pg_call([&] {
        Oid types[2] = {JSONBOID, INT8ARRAYOID};
        Datum values[2] = {batch, wanted};
        int rc = SPI_execute_with_args(
            "SELECT pg_catalog.jsonb_agg(e.value ORDER BY e.ordinality)"
            "  FROM pg_catalog.jsonb_array_elements($1) WITH ORDINALITY AS e"
            " WHERE e.ordinality OPERATOR(pg_catalog.=) ANY ($2)",
            2, types, values, nullptr, true, 1);
        if (rc != SPI_OK_SELECT || SPI_processed != 1) elog(ERROR, "whizbang: could not split the batch");
        bool isnull = false;
        Datum part = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
        return SPI_datumTransfer(part, false, -1);
    });
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
        if (mode == RoutedRows::one_per_input && rows != positions.size())
            throw SqlError(ERRCODE_INTERNAL_ERROR, "whizbang: shard " + std::to_string(shard) + " answered " +
                                                       std::to_string(rows) + " rows for " +
                                                       std::to_string(positions.size()) + " messages");
        std::size_t next = 0;  // new_only: the next position a row may belong to
        for (uint64 r = 0; r < rows; ++r) {
            std::size_t position = 0;
            if (mode == RoutedRows::one_per_input) {
                position = positions[r];
            } else {
                bool isnull = false;
                const core::Uuid got = uuid_from_datum(spi_value(r, 1, &isnull));
                while (next < positions.size() && messages[positions[next]].id != got) ++next;
                if (next == positions.size())
                    throw SqlError(ERRCODE_INTERNAL_ERROR, "whizbang: a shard answered for a message it was not sent");
                position = positions[next++];
            }
            out.push_back(copy_routed_row(r, desc, position));
            const RoutedRow& row = out.back();
            if (!row.nulls[2]) {
                const bool is_new = TupleDescAttr(desc, 2)->atttypid == BOOLOID
                                        ? DatumGetBool(row.values[2])
                                        : text_from_datum(row.values[2]) == "new";
                if (is_new) ++created;
            }
        }
    }
    spi.finish();
    put_in_order(rsinfo, out);
    return created;
}

}  // namespace whizbang::pg
