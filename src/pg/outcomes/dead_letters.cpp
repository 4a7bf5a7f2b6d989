// retry_dead_letters (DESIGN §3.4): dead letters of either source back as fresh work.
#include <map>
#include <set>
#include <tuple>

#include "pg/boundary/args.h"
#include "pg/citus/citus_route.h"
#include "pg/boundary/arrays.h"
#include "pg/boundary/spi.h"
#include "pg/citus/work_route.h"
#include "pg/store/work_store.h"
#include "pg/boundary/required_privileges.h"

namespace whizbang::pg {
namespace {

// The dead letters named, locked in id order.
CachedPlan dead_letters_plan(
    "SELECT d.dead_letter_id, d.source, COALESCE(d.consumer, '')::pg_catalog.text, d.message_id,"
    "       COALESCE(d.handler_name, d.destination), d.message_type, d.envelope, d.metadata, d.scope, d.stream_id,"
    "       d.is_event, d.sent_at"
    "  FROM whizbang.wh_dead_letters d"
    " WHERE d.dead_letter_id OPERATOR(pg_catalog.=) ANY ($1)"
    " ORDER BY d.dead_letter_id FOR UPDATE OF d",
    {INT8ARRAYOID});

// Of the inbox messages named, those already back in the inbox (stored again since): they are
// left where they are. (An outbox message stored again is found by the store's ON CONFLICT.)
// Asked only when there are inbox dead letters, so retrying outbox ones needs no inbox grant.
CachedPlan inbox_present_plan(
    "SELECT i.message_id, i.consumer::pg_catalog.text FROM whizbang.wh_inbox/*message*/ i"
    "  JOIN ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS u(id, consumer)"
    "    ON i.message_id OPERATOR(pg_catalog.=) u.id AND i.consumer OPERATOR(pg_catalog.=) u.consumer",
    {UUIDARRAYOID, TEXTARRAYOID});

CachedPlan forget_dead_letters_plan(
    "DELETE FROM whizbang.wh_dead_letters WHERE dead_letter_id OPERATOR(pg_catalog.=) ANY ($1)", {INT8ARRAYOID});

}  // namespace
}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// retry_dead_letters(p_dead_letter_ids bigint[]) RETURNS int: dead letters back as fresh work
// (attempts 0, due now, at the end of their stream); an inbox message's dedup record was never
// removed, so a redelivery of the same id is still a duplicate. Returns how many went back.
WB_ROUTED_FUNCTION(wb_retry_dead_letters, by_lookup) {
    auto ids = int8_array_arg(fcinfo, 0, "p_dead_letter_ids");
    if (!ids || ids->empty()) PG_RETURN_INT32(0);
    std::vector<int64_t> wanted;
    for (std::size_t i = 0; i < ids->size(); ++i) {
        if (!(*ids)[i])
            throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "p_dead_letter_ids[" + std::to_string(i + 1) + "] must not be null");
        wanted.push_back(*(*ids)[i]);
    }
    require_privileges("retry_dead_letters");
    if (must_route()) PG_RETURN_INT32(route_dead_letter_retry(fcinfo, wanted));
    SpiConnection spi;
    uint64 rows = dead_letters_plan.execute({int8_array(wanted)});
    // Grouped by source and consumer: each group is stored like a batch of its own.
    struct Group {
        std::vector<Message> messages;
        std::vector<int64_t> dead_letter_ids;
    };
    std::map<std::pair<Source, std::string>, Group> groups;
    std::set<std::tuple<Source, std::string, core::Uuid>> seen;
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false, null2 = false;
        const Source source = text_from_datum(spi_value(r, 2, &isnull)) == "inbox" ? Source::inbox : Source::outbox;
        std::string consumer = text_from_datum(spi_value(r, 3, &isnull));
        Message m;
        m.id = uuid_from_datum(spi_value(r, 4, &isnull));
        if (!seen.emplace(source, consumer, m.id).second) continue;  // the same message dead-lettered twice
        m.target = text_from_datum(spi_value(r, 5, &isnull));
        m.message_type = text_from_datum(spi_value(r, 6, &isnull));
        m.envelope = spi_value(r, 7, &isnull);
        Datum d = spi_value(r, 8, &null2);
        if (!null2) m.metadata = d;
        d = spi_value(r, 9, &null2);
        if (!null2) m.scope = d;
        d = spi_value(r, 10, &null2);
        if (!null2) m.stream_id = uuid_from_datum(d);
        m.is_event = DatumGetBool(spi_value(r, 11, &isnull));
        d = spi_value(r, 12, &null2);
        if (!null2) m.sent_at = DatumGetTimestampTz(d);
        Group& g = groups[{source, consumer}];
        g.messages.push_back(std::move(m));
        g.dead_letter_ids.push_back(DatumGetInt64(spi_value(r, 1, &isnull)));
    }
    // What storing them back needs, for the sources of the dead letters named.
    CallShape found;
    for (const auto& [key, g] : groups) (key.first == Source::inbox ? found.inbox : found.outbox) = true;
    require_privileges("retry_dead_letters", found);
    std::set<std::pair<core::Uuid, std::string>> present;
    {
        std::vector<core::Uuid> ids;
        std::vector<std::string> consumers;
        for (const auto& [key, g] : groups)
            if (key.first == Source::inbox)
                for (const Message& m : g.messages) {
                    ids.push_back(m.id);
                    consumers.push_back(key.second);
                }
        uint64 n = ids.empty() ? 0 : inbox_present_plan.execute({uuid_array(ids), text_array(consumers)});
        for (uint64 r = 0; r < n; ++r) {
            bool isnull = false;
            present.emplace(uuid_from_datum(spi_value(r, 1, &isnull)), text_from_datum(spi_value(r, 2, &isnull)));
        }
    }
    std::vector<int64_t> retried;
    for (const auto& [key, g] : groups) {
        StoreOptions o;
        o.source = key.first;
        o.consumer = key.second;
        o.now = GetCurrentTransactionStartTimestamp();
        std::vector<std::size_t> todo;
        for (std::size_t i = 0; i < g.messages.size(); ++i)
            if (!present.count({g.messages[i].id, key.second})) todo.push_back(i);
        if (todo.empty()) continue;
        std::vector<bool> written = store_new(o, g.messages, todo);
        for (std::size_t k = 0; k < todo.size(); ++k)
            if (written[k]) retried.push_back(g.dead_letter_ids[todo[k]]);
    }
    if (!retried.empty()) forget_dead_letters_plan.execute({int8_array(retried)});
    spi.finish();
    PG_RETURN_INT32(static_cast<int32>(retried.size()));
}
