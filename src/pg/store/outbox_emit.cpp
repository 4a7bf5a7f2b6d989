// emit_outbox_messages (DESIGN §3.10): the outbox through the WAL. Each message becomes a
// transactional logical decoding message in the caller's transaction: decoded (and relayed by
// whizbang-relay) only if that transaction commits, in commit order, and no table row is
// written, so there is nothing to claim, delete or vacuum.
#include <string>
#include <unordered_set>
#include <vector>

#include "core/emitted_message.h"
#include "pg/boundary/args.h"
#include "pg/boundary/memory.h"
#include "pg/ops/logical_slots.h"
#include "pg/store/message_parse.h"

extern "C" {
#include "access/xlog.h"
}

using namespace whizbang;
using namespace whizbang::pg;

namespace {

constexpr std::int64_t kUnixToPostgresEpochUs =
    static_cast<std::int64_t>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;

// Messages emitted where nothing decodes them are lost without a trace: refuse instead. Logical
// decoding needs wal_level = logical, and only a slot that exists when the transaction commits
// (created before it began) receives its messages.
void require_a_decoding_slot() {
    if (RecoveryInProgress())
        throw SqlError(ERRCODE_READ_ONLY_SQL_TRANSACTION, "emit_outbox_messages cannot run on a standby", {},
                       "Emit on the primary: a standby writes no WAL.");
    if (XactReadOnly)
        throw SqlError(ERRCODE_READ_ONLY_SQL_TRANSACTION,
                       "emit_outbox_messages cannot run in a read-only transaction");
    if (wal_level < WAL_LEVEL_LOGICAL)
        throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, "emit_outbox_messages needs wal_level = logical",
                       "wal_level is " + std::string(pg_call([] { return GetConfigOption("wal_level", false, false); })) +
                           ": no replication slot could decode the messages, so they would be lost.",
                       "Set wal_level = logical and restart the server (docs/outbox.md#the-wal-outbox-0150).");
    const LogicalSlots slots = logical_slots();
    if (slots.valid == 0)
        throw SqlError(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                       "emit_outbox_messages found no logical replication slot in this database",
                       slots.invalidated > 0 ? "Its logical slots were invalidated: messages emitted now would reach no relay."
                                   : "Messages emitted now would reach no relay and be lost.",
                       "Create the relay's slot first: SELECT * FROM whizbang.create_outbox_relay();");
}

}  // namespace

// emit_outbox_messages(p_messages jsonb, p_now timestamptz DEFAULT now())
//   RETURNS TABLE(message_id uuid, stream_id uuid, emitted boolean): one row per input element
// Never routed: on Citus the messages enter the WAL of the node that runs the transaction.
WB_ROUTED_FUNCTION(wb_emit_outbox_messages, local) {
    const TimestampTz now = timestamptz_arg(fcinfo, 1, "p_now");
    std::vector<Message> messages = parse_messages(fcinfo, Source::outbox, false);
    for (std::size_t i = 0; i < messages.size(); ++i)
        if (messages[i].scheduled_for)
            throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED,
                           "p_messages[" + std::to_string(i) + "] has ScheduledFor: an emitted message leaves at commit",
                           {}, "Store messages for later with whizbang.store_outbox_messages.");

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (messages.empty()) return (Datum)0;
    require_a_decoding_slot();

    // An id repeated inside one call is emitted once, at its first occurrence, as
    // store_outbox_messages stores it once. Across calls nothing is remembered: the receiver's
    // inbox deduplicates (a relay resends after a restart anyway).
    std::vector<bool> emitted(messages.size(), false);
    std::unordered_set<std::string> seen;
    seen.reserve(messages.size());
    std::string json;
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const Message& m = messages[i];
        if (!seen.emplace(reinterpret_cast<const char*>(m.id.data()), m.id.size()).second) continue;
        core::EmittedMessage e;
        e.id = m.id;
        e.destination = m.target;
        e.message_type = m.message_type;
        e.stream_id = m.stream_id;
        e.is_event = m.is_event;
        e.created_at_unix_us = now + kUnixToPostgresEpochUs;
        // jsonb's text: one line, in the database encoding (UTF-8 is what receivers expect).
        char *envelope = nullptr, *scope = nullptr, *metadata = nullptr;
        pg_call([&] {
            auto text = [](Datum d) {
                Jsonb* jb = DatumGetJsonbP(d);
                return JsonbToCString(nullptr, &jb->root, VARSIZE(jb));
            };
            envelope = text(m.envelope);
            if (m.scope && *m.scope) scope = text(*m.scope);
            if (m.metadata && *m.metadata) metadata = text(*m.metadata);
        });
        e.envelope_json = envelope;
        if (scope) e.scope_json = scope;
        if (metadata) e.metadata_json = metadata;
        json.clear();
        core::append_emitted_json(json, e);
        pg_call([&] {
            compat::log_logical_message(core::kEmittedPrefix.data(), json.data(), json.size(), true);
            pfree(envelope);
            if (scope) pfree(scope);
            if (metadata) pfree(metadata);
            if ((i & 1023) == 0) CHECK_FOR_INTERRUPTS();
        });
        emitted[i] = true;
    }

    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_call([&] {
        for (std::size_t i = 0; i < messages.size(); ++i) {
            put_message_row(rsinfo, messages[i], BoolGetDatum(emitted[i]));
        }
    });
    return (Datum)0;
}
