// store_inbox_messages and inbox_receive (DESIGN §3.2).
//
// One call: parse the jsonb batch once (message_parse), record the deliveries in the dedup
// table (the same native path as dedup_insert_many), then store the new messages as work with
// one set-based INSERT per table (work_store).
#include <map>

#include "core/partition.h"
#include "pg/boundary/args.h"
#include "pg/citus/citus_route.h"
#include "pg/boundary/arrays.h"
#include "pg/store/dedup.h"
#include "pg/citus/message_route.h"
#include "pg/citus/shard_scope.h"
#include "pg/boundary/spi.h"
#include "pg/store/work_store.h"
#include "pg/boundary/required_privileges.h"

namespace whizbang::pg {
namespace {

std::vector<core::DedupOutcome> store(const StoreOptions& o, const std::vector<Message>& messages) {
    SpiConnection spi;
    std::vector<core::DedupElement> elements(messages.size());
    std::vector<std::optional<TimestampTz>> sent_at(messages.size());
    for (std::size_t i = 0; i < messages.size(); ++i) {
        elements[i].id = messages[i].id;
        elements[i].fingerprint = messages[i].fingerprint;
        sent_at[i] = messages[i].sent_at;
    }
    // Inside a routed call a message's dedup record goes to its partition: its stream's.
    PartitionOfId partition;
    std::map<core::Uuid, int> partitions;
    if (in_shard_scope()) {
        for (const Message& m : messages) partitions[m.id] = core::partition_of(m.stream_id.value_or(m.id), o.partition_count);
        partition = [&partitions](const core::Uuid& id) -> std::optional<int> { return partitions.at(id); };
    }
    std::vector<core::DedupOutcome> outcomes =
        record_deliveries(o.function_name, o.consumer, elements, sent_at, o.now, partition);
    std::vector<std::size_t> fresh;
    for (std::size_t i = 0; i < outcomes.size(); ++i)
        if (outcomes[i] == core::DedupOutcome::fresh) fresh.push_back(i);
    if (!fresh.empty()) store_new(o, messages, fresh);
    spi.finish();
    return outcomes;
}

}  // namespace
}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// store_inbox_messages(p_messages, p_instance_id, p_lease_expiry, p_now, p_partition_count, p_consumer)
//   RETURNS TABLE(message_id uuid, stream_id uuid, was_newly_created boolean): new messages only
WB_ROUTED_FUNCTION(wb_store_inbox_messages, by_message) {
    StoreOptions o;
    if (!PG_ARGISNULL(1)) o.instance = uuid_from_datum(PG_GETARG_DATUM(1));
    o.now = timestamptz_arg(fcinfo, 3, "p_now");
    o.partition_count = positive_int_arg(fcinfo, 4, "p_partition_count");
    o.consumer = consumer_arg(fcinfo, 5);
    o.lease_expiry = lease_expiry_arg(fcinfo, 2, o.now, kDefaultLeaseUs, o.instance.has_value());
    // No fingerprints here (the seed's contract, and the hot ingest path): a message stored
    // this way is on record without one, so a later inbox_receive of its id is a duplicate.
    std::vector<Message> messages = parse_messages(fcinfo, Source::inbox, false);

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (messages.empty()) return (Datum)0;
    CallShape shape;
    shape.instance = o.instance.has_value();
    require_privileges("store_inbox_messages", shape);
    if (must_route()) {
        route_messages(fcinfo, "store_inbox_messages", messages, o.partition_count, RoutedRows::new_only);
        return (Datum)0;
    }
    std::vector<core::DedupOutcome> outcomes = store(o, messages);

    // A routed part answers every message (was_newly_created false for the others), so the
    // coordinator can tell a part heard in full from one that was not (message_route.h).
    const bool every_row = in_shard_scope();
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_call([&] {
        for (std::size_t i = 0; i < messages.size(); ++i) {
            if (outcomes[i] != core::DedupOutcome::fresh && !every_row) continue;
            put_message_row(rsinfo, messages[i], BoolGetDatum(outcomes[i] == core::DedupOutcome::fresh));
        }
    });
    return (Datum)0;
}

// inbox_receive(p_messages, p_consumer, p_now, p_partition_count)
//   RETURNS TABLE(message_id uuid, stream_id uuid, outcome text): one row per input, input order
WB_ROUTED_FUNCTION(wb_inbox_receive, by_message) {
    StoreOptions o;
    o.function_name = "inbox_receive";
    o.consumer = consumer_arg(fcinfo, 1);
    o.now = timestamptz_arg(fcinfo, 2, "p_now");
    o.partition_count = positive_int_arg(fcinfo, 3, "p_partition_count");
    std::vector<Message> messages = parse_messages(fcinfo, Source::inbox, true);

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (messages.empty()) return (Datum)0;
    require_privileges("inbox_receive");
    if (must_route()) {
        route_messages(fcinfo, "inbox_receive", messages, o.partition_count, RoutedRows::one_per_input);
        return (Datum)0;
    }
    std::vector<core::DedupOutcome> outcomes = store(o, messages);

    Datum words[4];
    for (auto o : {core::DedupOutcome::fresh, core::DedupOutcome::duplicate, core::DedupOutcome::conflict,
                   core::DedupOutcome::expired})
        words[static_cast<int>(o)] = text_datum(core::outcome_word(o));
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_call([&] {
        for (std::size_t i = 0; i < messages.size(); ++i) {
            put_message_row(rsinfo, messages[i], words[static_cast<int>(outcomes[i])]);
        }
    });
    return (Datum)0;
}
