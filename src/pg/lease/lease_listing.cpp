// Leases as operators see them (DESIGN §3.8): whizbang.leases (through _leases()), and the
// lease columns of queues(), stats(), peek(), cancel_work's view of a row and maintenance.
//
// The shared-memory store knows a lease's consumer by its hash; the consumer is read back from
// the lease's work row, which also leaves out leases whose row is gone or finished.
#include <map>

#include "pg/citus/distributed.h"
#include "pg/boundary/args.h"
#include "pg/boundary/arrays.h"
#include "pg/lease/lease_store.h"
#include "pg/boundary/spi.h"
#include "pg/claim/work.h"

namespace whizbang::pg {
namespace {

CachedPlan inbox_rows_plan(
    "SELECT w.message_id, w.consumer::pg_catalog.text FROM whizbang.wh_inbox w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($1) AND w.processed_at IS NULL",
    {UUIDARRAYOID});
CachedPlan outbox_rows_plan(
    "SELECT w.message_id, ''::pg_catalog.text FROM whizbang.wh_outbox w"
    " WHERE w.message_id OPERATOR(pg_catalog.=) ANY ($1) AND w.processed_at IS NULL",
    {UUIDARRAYOID});

// The table store's leases: the lease columns of unfinished work rows.
CachedPlan table_leases_plan(
    "SELECT 'inbox'::pg_catalog.text AS source, w.consumer::pg_catalog.text AS consumer, w.message_id, w.stream_id,"
    "       w.lease_instance AS instance_id, w.lease_token, w.lease_expiry, w.attempts"
    "  FROM whizbang.wh_inbox w"
    " WHERE w.lease_token IS NOT NULL AND w.processed_at IS NULL"
    " UNION ALL "
    "SELECT 'outbox'::pg_catalog.text, NULL::pg_catalog.text, o.message_id, o.stream_id, o.lease_instance,"
    "       o.lease_token, o.lease_expiry, o.attempts"
    "  FROM whizbang.wh_outbox o"
    " WHERE o.lease_token IS NOT NULL AND o.processed_at IS NULL",
    {});

}  // namespace

std::vector<LiveLease> shared_leases(std::optional<Source> only) {
    std::vector<LiveLease> out;
    if (!shared_leases_active()) return out;
    std::vector<shm::Listed> listed = shm::leases_of_database();
    for (Source source : {Source::inbox, Source::outbox}) {
        if (only && *only != source) continue;
        std::map<core::Uuid, std::vector<const shm::Listed*>> by_id;
        std::vector<core::Uuid> ids;
        for (const shm::Listed& l : listed)
            if (l.source == source) {
                if (by_id[l.id].empty()) ids.push_back(l.id);
                by_id[l.id].push_back(&l);
            }
        if (ids.empty() || (source == Source::outbox && !outbox_installed())) continue;
        CachedPlan& plan = source == Source::inbox ? inbox_rows_plan : outbox_rows_plan;
        uint64 rows = plan.execute({uuid_array(ids)});
        for (uint64 r = 0; r < rows; ++r) {
            bool isnull = false;
            const core::Uuid id = uuid_from_datum(spi_value(r, 1, &isnull));
            std::string consumer = text_from_datum(spi_value(r, 2, &isnull));
            const uint64_t hash = shm::consumer_hash(consumer);
            for (const shm::Listed* l : by_id[id])
                if (l->consumer_hash == hash) out.push_back({source, id, consumer, l->lease});
        }
    }
    return out;
}

std::vector<Datum> lease_params(std::optional<Source> only) {
    std::vector<std::string> sources, consumers;
    std::vector<core::Uuid> ids, instances;
    std::vector<int64_t> tokens;
    std::vector<TimestampTz> expiries;
    std::vector<int> attempts;
    for (const LiveLease& l : shared_leases(only)) {
        sources.push_back(source_name(l.source));
        ids.push_back(l.id);
        consumers.push_back(l.consumer);
        instances.push_back(l.lease.instance);
        tokens.push_back(l.lease.token);
        expiries.push_back(l.lease.expiry);
        attempts.push_back(l.lease.attempts);
    }
    return {text_array(sources), uuid_array(ids), text_array(consumers), uuid_array(instances),
            int8_array(tokens), timestamptz_array(expiries), int4_array(attempts)};
}

std::vector<Oid> lease_param_types() {
    return {TEXTARRAYOID, UUIDARRAYOID, TEXTARRAYOID, UUIDARRAYOID, INT8ARRAYOID, TIMESTAMPTZARRAYOID, INT4ARRAYOID};
}

std::string lease_relation(int first) {
    std::string unnest;
    for (int k = 0; k < kLeaseParams; ++k)
        unnest += std::string(k ? ", " : "") + "pg_catalog.unnest($" + std::to_string(first + k) + ")";
    return "ROWS FROM (" + unnest + ") AS sl(source, message_id, consumer, instance_id, lease_token, lease_expiry, attempts)";
}

}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// _leases() RETURNS TABLE(source, consumer, message_id, stream_id, instance_id, lease_token,
// lease_expiry, attempts): the rows of whizbang.leases, from whichever store runs.
WB_ROUTED_FUNCTION(wb_leases, citus_sql) {
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    SpiConnection spi;
    // A distributed install keeps its leases in the rows; Citus reads every shard's.
    if (!shared_leases_active() || distributed()) {
        spi_rows_to_result(rsinfo, table_leases_plan.execute({}));
    } else {
        std::vector<LiveLease> leases = shared_leases(std::nullopt);
        std::vector<Datum> consumers, sources;
        for (const LiveLease& l : leases) {
            sources.push_back(text_datum(source_name(l.source)));
            consumers.push_back(l.source == Source::inbox ? text_datum(l.consumer) : (Datum)0);
        }
        pg_call([&] {
            for (std::size_t i = 0; i < leases.size(); ++i) {
                const shm::Lease& l = leases[i].lease;
                Datum values[8] = {sources[i], consumers[i], PointerGetDatum(leases[i].id.data()),
                                   PointerGetDatum(l.stream.data()), PointerGetDatum(l.instance.data()),
                                   Int64GetDatum(l.token), TimestampTzGetDatum(l.expiry), Int32GetDatum(l.attempts)};
                bool nulls[8] = {false, leases[i].source != Source::inbox, false, !l.has_stream, false, false, false, false};
                tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
            }
        });
    }
    spi.finish();
    return (Datum)0;
}

// _lease_row_deleted() RETURNS trigger, AFTER DELETE FOR EACH ROW and AFTER TRUNCATE on the
// work tables (TG_ARGV[0]: 'inbox' or 'outbox'). A work row deleted by anything but whizbang's
// own calls (by hand, a cascade, a test's clean-up) ends its shared lease with the deleting
// transaction, so a row stored again under the same id later is not held by a stale lease; a
// truncate ends them all the same way. whizbang's own deletes have ended the lease already.
WB_ROUTED_FUNCTION(wb_lease_row_deleted, local) {
    if (!CALLED_AS_TRIGGER(fcinfo))
        throw SqlError(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, "_lease_row_deleted() must be called as a trigger");
    TriggerData* data = reinterpret_cast<TriggerData*>(fcinfo->context);
    if (!shared_leases_active()) return PointerGetDatum(nullptr);
    const Source source = strcmp(data->tg_trigger->tgargs[0], "outbox") == 0 ? Source::outbox : Source::inbox;
    if (TRIGGER_FIRED_BY_TRUNCATE(data->tg_event)) {
        shm::end_all(source);
        return PointerGetDatum(nullptr);
    }
    TupleDesc desc = RelationGetDescr(data->tg_relation);
    bool id_null = false, consumer_null = false;
    const int id_col = pg_call([&] { return SPI_fnumber(desc, "message_id"); });
    const int consumer_col = pg_call([&] { return SPI_fnumber(desc, "consumer"); });
    Datum id = pg_call([&] { return heap_getattr(data->tg_trigtuple, id_col, desc, &id_null); });
    Datum consumer = pg_call([&] { return heap_getattr(data->tg_trigtuple, consumer_col, desc, &consumer_null); });
    if (!id_null && !consumer_null) {
        bool mismatch = false;
        // AFTER DELETE: the row is deleted by this transaction already (no mark needed).
        (void)shm::end({source, uuid_from_datum(id), text_from_datum(consumer)}, std::nullopt, &mismatch, true);
    }
    return PointerGetDatum(nullptr);
}
