// store_outbox_messages (DESIGN §3.3): messages an application sends, stored in its own
// transaction with the business write, for a relay to claim and publish.
#include "pg/boundary/args.h"
#include "pg/citus/citus_route.h"
#include "pg/citus/message_route.h"
#include "pg/citus/shard_scope.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/store/work_store.h"
#include "pg/boundary/required_privileges.h"

using namespace whizbang;
using namespace whizbang::pg;

// store_outbox_messages(p_messages, p_instance_id, p_lease_expiry, p_now, p_partition_count)
//   RETURNS TABLE(message_id uuid, stream_id uuid, was_newly_created boolean): one row per input
WB_ROUTED_FUNCTION(wb_store_outbox_messages, by_message) {
    StoreOptions o;
    o.source = Source::outbox;
    o.function_name = "store_outbox_messages";
    if (!PG_ARGISNULL(1)) o.instance = uuid_from_datum(PG_GETARG_DATUM(1));
    o.now = timestamptz_arg(fcinfo, 3, "p_now");
    o.partition_count = positive_int_arg(fcinfo, 4, "p_partition_count");
    o.lease_expiry = lease_expiry_arg(fcinfo, 2, o.now, kDefaultLeaseUs, o.instance.has_value());
    std::vector<Message> messages = parse_messages(fcinfo, Source::outbox, false);

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (messages.empty()) return (Datum)0;
    CallShape shape;
    shape.instance = o.instance.has_value();
    require_privileges("store_outbox_messages", shape);
    if (must_route()) {
        // The relays listen on the coordinator: the wake-up is sent from here.
        std::size_t created =
            route_messages(fcinfo, "store_outbox_messages", messages, o.partition_count, RoutedRows::one_per_input);
        if (created > 0 && !in_node_scope()) {
            SpiConnection spi;
            if (setting_bool("outbox_notify")) pg_call([] { Async_Notify("whizbang_outbox", nullptr); });
            spi.finish();
        }
        return (Datum)0;
    }
    std::vector<std::size_t> all(messages.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    SpiConnection spi;
    std::vector<bool> created = store_new(o, messages, all);
    bool any = false;
    for (bool c : created) any = any || c;
    // The relay's wake-up: PostgreSQL folds identical notifications of one transaction into
    // one, delivers them at commit only, and drops them on rollback (of a savepoint too).
    if (any && !in_shard_scope() && setting_bool("outbox_notify")) pg_call([] { Async_Notify("whizbang_outbox", nullptr); });
    spi.finish();

    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_call([&] {
        for (std::size_t i = 0; i < messages.size(); ++i) {
            put_message_row(rsinfo, messages[i], BoolGetDatum(created[i]));
        }
    });
    return (Datum)0;
}
