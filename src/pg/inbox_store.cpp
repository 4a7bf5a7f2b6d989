// store_inbox_messages and inbox_receive (DESIGN §3.2).
//
// One call: parse the jsonb batch once (binary container lookups, no text round trip), record
// the deliveries in the dedup table (the same native path as dedup_insert_many), then store
// the new messages with one set-based INSERT per table. Streams are numbered under a row lock
// of their counter, so the messages of one stream are ordered by the commit order of the
// storing transactions, and inside a batch by element order.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "core/canonical_json.h"
#include "core/partition.h"
#include "pg/args.h"
#include "pg/arrays.h"
#include "pg/dedup.h"
#include "pg/spi.h"

namespace whizbang::pg {
namespace {

constexpr int64_t kDefaultLeaseUs = 300 * USECS_PER_SEC;

struct InboxMessage {
    core::Uuid id{};
    std::string handler_name, message_type;
    Datum envelope = 0;  // Jsonb*
    std::optional<Datum> metadata, scope;
    std::optional<core::Uuid> stream_id;
    bool is_event = false;
    std::optional<TimestampTz> sent_at, scheduled_for;
    std::optional<std::string> fingerprint;  // of Envelope (inbox_receive only)
};

[[noreturn]] void bad_field(std::size_t index, const char* field, const std::string& what) {
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                   "p_messages[" + std::to_string(index) + "]." + field + " " + what,
                   {}, "Elements are numbered from 0, as jsonb's -> operator numbers them.");
}

// The value of `field` in the element object, nullptr when absent or JSON null.
JsonbValue* field_of(JsonbContainer* object, const char* field) {
    return pg_call([&]() -> JsonbValue* {
        JsonbValue* v = getKeyJsonValueFromContainer(object, field, static_cast<int>(strlen(field)), nullptr);
        return (v == nullptr || v->type == jbvNull) ? nullptr : v;
    });
}

std::string string_field(JsonbContainer* object, std::size_t index, const char* field) {
    JsonbValue* v = field_of(object, field);
    if (v == nullptr) bad_field(index, field, "is required");
    if (v->type != jbvString) bad_field(index, field, "must be a string");
    if (v->val.string.len == 0) bad_field(index, field, "must not be empty");
    return std::string(v->val.string.val, v->val.string.len);
}

std::optional<core::Uuid> uuid_field(JsonbContainer* object, std::size_t index, const char* field, bool required) {
    JsonbValue* v = field_of(object, field);
    if (v == nullptr) {
        if (required) bad_field(index, field, "is required");
        return std::nullopt;
    }
    if (v->type != jbvString) bad_field(index, field, "must be a uuid string");
    auto id = core::parse_uuid(std::string_view(v->val.string.val, v->val.string.len));
    if (!id) bad_field(index, field, "is not a valid uuid: \"" + std::string(v->val.string.val, v->val.string.len) + "\"");
    return id;
}

std::optional<TimestampTz> timestamp_field(JsonbContainer* object, std::size_t index, const char* field) {
    JsonbValue* v = field_of(object, field);
    if (v == nullptr) return std::nullopt;
    if (v->type != jbvString) bad_field(index, field, "must be a timestamp string");
    std::string text(v->val.string.val, v->val.string.len);
    TimestampTz ts;
    try {
        ts = pg_call([&] {
            return DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(text.c_str()),
                                                           ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
        });
    } catch (const PgError&) {
        bad_field(index, field, "is not a valid timestamp: \"" + text + "\"");
    }
    if (TIMESTAMP_NOT_FINITE(ts)) bad_field(index, field, "must be a finite timestamp");
    return ts;
}

std::optional<Datum> jsonb_field(JsonbContainer* object, const char* field) {
    JsonbValue* v = field_of(object, field);
    if (v == nullptr) return std::nullopt;
    return pg_call([&] { return PointerGetDatum(JsonbValueToJsonb(v)); });
}

std::vector<InboxMessage> parse_messages(FunctionCallInfo fcinfo, bool with_fingerprints) {
    require_not_null(fcinfo, 0, "p_messages");
    Jsonb* batch = pg_call([&] { return PG_GETARG_JSONB_P(0); });
    if (JB_ROOT_IS_SCALAR(batch) || !JB_ROOT_IS_ARRAY(batch))
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "p_messages must be a JSON array of message objects");
    const std::size_t count = JB_ROOT_COUNT(batch);
    if (count > kMaxBatchElements)
        throw SqlError(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                       "p_messages has " + std::to_string(count) + " elements, more than the limit of " +
                           std::to_string(kMaxBatchElements) + " per call",
                       {}, "Split the batch into several calls.");

    std::vector<InboxMessage> messages(count);
    for (std::size_t i = 0; i < count; ++i) {
        JsonbValue* element = pg_call([&] { return getIthJsonbValueFromContainer(&batch->root, static_cast<uint32>(i)); });
        if (element->type != jbvBinary || !JsonContainerIsObject(element->val.binary.data))
            throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "p_messages[" + std::to_string(i) + "] must be an object");
        JsonbContainer* object = element->val.binary.data;
        InboxMessage& m = messages[i];
        m.id = *uuid_field(object, i, "MessageId", true);
        m.handler_name = string_field(object, i, "HandlerName");
        m.message_type = string_field(object, i, "MessageType");
        std::optional<Datum> envelope = jsonb_field(object, "Envelope");
        if (!envelope) bad_field(i, "Envelope", "is required");
        m.envelope = *envelope;
        m.metadata = jsonb_field(object, "Metadata");
        m.scope = jsonb_field(object, "Scope");
        m.stream_id = uuid_field(object, i, "StreamId", false);
        if (JsonbValue* v = field_of(object, "IsEvent")) {
            if (v->type != jbvBool) bad_field(i, "IsEvent", "must be true, false or null");
            m.is_event = v->val.boolean;
        }
        m.sent_at = timestamp_field(object, i, "SentAt");
        m.scheduled_for = timestamp_field(object, i, "ScheduledFor");
        if (with_fingerprints) {
            char* text = pg_call([&] {
                Jsonb* jb = DatumGetJsonbP(m.envelope);
                return JsonbToCString(nullptr, &jb->root, VARSIZE(jb));
            });
            core::Sha256Digest digest = core::fingerprint(text);
            m.fingerprint.emplace(reinterpret_cast<const char*>(digest.data()), digest.size());
        }
        if ((i & 1023) == 0) pg_call([] { CHECK_FOR_INTERRUPTS(); });
    }
    return messages;
}

CachedPlan number_streams_plan(
    "INSERT INTO whizbang.wh_inbox_streams AS s (consumer, stream_id, last_seq)"
    " SELECT $1, u.stream_id, u.n FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)) AS u(stream_id, n)"
    " ON CONFLICT (stream_id, consumer) DO UPDATE SET last_seq = s.last_seq OPERATOR(pg_catalog.+) excluded.last_seq"
    " RETURNING s.stream_id, s.last_seq",
    {TEXTOID, UUIDARRAYOID, INT8ARRAYOID});

CachedPlan busy_streams_plan(
    "SELECT DISTINCT w.stream_id FROM whizbang.wh_inbox_work w"
    " WHERE w.consumer OPERATOR(pg_catalog.=) $1 AND w.stream_id OPERATOR(pg_catalog.=) ANY ($2)"
    "   AND w.processed_at IS NULL",
    {TEXTOID, UUIDARRAYOID});

CachedPlan next_token_plan("SELECT pg_catalog.nextval('whizbang.wh_lease_token_seq')", {});

CachedPlan insert_messages_plan(
    "INSERT INTO whizbang.wh_inbox (consumer, message_id, handler_name, message_type, envelope, metadata, scope,"
    "  stream_id, is_event, sent_at, received_at)"
    " SELECT $1, u.id, u.handler, u.type, u.envelope, u.metadata, u.scope, u.stream_id, u.is_event, u.sent_at, $2"
    " FROM ROWS FROM (pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6),"
    "  pg_catalog.unnest($7), pg_catalog.unnest($8), pg_catalog.unnest($9), pg_catalog.unnest($10),"
    "  pg_catalog.unnest($11))"
    "  AS u(id, handler, type, envelope, metadata, scope, stream_id, is_event, sent_at)",
    {TEXTOID, TIMESTAMPTZOID, UUIDARRAYOID, TEXTARRAYOID, TEXTARRAYOID, JSONBARRAYOID, JSONBARRAYOID, JSONBARRAYOID,
     UUIDARRAYOID, BOOLARRAYOID, TIMESTAMPTZARRAYOID});

CachedPlan insert_work_plan(
    "INSERT INTO whizbang.wh_inbox_work (consumer, message_id, stream_id, stream_seq, partition_number, scheduled_for,"
    "  lease_instance, lease_token, lease_expiry)"
    " SELECT $1, u.id, u.stream_id, u.seq, u.part, u.due,"
    "  CASE WHEN u.pre THEN $2 END, CASE WHEN u.pre THEN $3 END, CASE WHEN u.pre THEN $4 END"
    " FROM ROWS FROM (pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8),"
    "  pg_catalog.unnest($9), pg_catalog.unnest($10)) AS u(id, stream_id, seq, part, due, pre)",
    {TEXTOID, UUIDOID, INT8OID, TIMESTAMPTZOID, UUIDARRAYOID, UUIDARRAYOID, INT8ARRAYOID, INT4ARRAYOID,
     TIMESTAMPTZARRAYOID, BOOLARRAYOID});

CachedPlan insert_preleased_plan(
    "INSERT INTO whizbang.wh_inbox_preleased (instance_id, consumer, message_id, lease_token)"
    " SELECT $1, $2, u.id, $3 FROM pg_catalog.unnest($4) AS u(id)",
    {UUIDOID, TEXTOID, INT8OID, UUIDARRAYOID});

struct StoreOptions {
    const char* function_name = "store_inbox_messages";
    std::string consumer;
    TimestampTz now = 0;
    int partition_count = 10000;
    std::optional<core::Uuid> instance;  // pre-lease new rows of idle streams to this instance
    TimestampTz lease_expiry = 0;
};

// Per new message (by input index): its arrival number within its stream.
std::map<std::size_t, int64_t> number_streams(Datum consumer, const std::vector<InboxMessage>& messages,
                                              const std::vector<std::size_t>& fresh) {
    std::map<core::Uuid, int64_t> per_stream;  // sorted: counters are locked in one order
    for (std::size_t i : fresh)
        if (messages[i].stream_id) ++per_stream[*messages[i].stream_id];
    std::map<std::size_t, int64_t> seq;
    if (per_stream.empty()) return seq;
    std::vector<core::Uuid> streams;
    std::vector<int64_t> counts;
    for (const auto& [stream, n] : per_stream) {
        streams.push_back(stream);
        counts.push_back(n);
    }
    uint64 rows = number_streams_plan.execute({consumer, uuid_array(streams), int8_array(counts)});
    std::map<core::Uuid, int64_t> next;  // first number of this batch, per stream
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        core::Uuid stream = uuid_from_datum(spi_value(r, 1, &isnull));
        int64_t last = DatumGetInt64(spi_value(r, 2, &isnull));
        next[stream] = last - per_stream[stream] + 1;
    }
    for (std::size_t i : fresh)
        if (messages[i].stream_id) seq[i] = next[*messages[i].stream_id]++;
    return seq;
}

// Streams of `fresh` that already have unfinished work: their new rows wait their turn.
std::set<core::Uuid> busy_streams(Datum consumer, const std::vector<InboxMessage>& messages,
                                  const std::vector<std::size_t>& fresh) {
    std::set<core::Uuid> wanted, busy;
    for (std::size_t i : fresh)
        if (messages[i].stream_id) wanted.insert(*messages[i].stream_id);
    if (wanted.empty()) return busy;
    uint64 rows = busy_streams_plan.execute({consumer, uuid_array(std::vector<core::Uuid>(wanted.begin(), wanted.end()))});
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false;
        busy.insert(uuid_from_datum(spi_value(r, 1, &isnull)));
    }
    return busy;
}

// Stores the messages named by `fresh` as new inbox work (message row + work row).
void insert_new(const StoreOptions& o, const std::vector<InboxMessage>& messages, const std::vector<std::size_t>& fresh) {
    Datum consumer = text_datum(o.consumer);
    std::map<std::size_t, int64_t> seq = number_streams(consumer, messages, fresh);
    std::set<core::Uuid> busy;
    int64_t token = 0;
    if (o.instance) {
        busy = busy_streams(consumer, messages, fresh);
        next_token_plan.execute({});
        bool isnull = false;
        token = DatumGetInt64(spi_value(0, 1, &isnull));
    }

    const std::size_t n = fresh.size();
    std::vector<core::Uuid> ids(n);
    std::vector<std::optional<core::Uuid>> streams(n);
    std::vector<std::string> handlers(n), types(n);
    std::vector<Datum> envelopes(n), metadata(n), scopes(n);
    std::vector<char> no_nulls(n, 0), metadata_nulls(n, 0), scope_nulls(n, 0), is_event(n), pre_leased(n);
    std::vector<std::optional<TimestampTz>> sent(n);
    std::vector<TimestampTz> due(n);
    std::vector<int> partitions(n);
    std::vector<std::optional<int64_t>> seqs(n);
    for (std::size_t k = 0; k < n; ++k) {
        const InboxMessage& m = messages[fresh[k]];
        ids[k] = m.id;
        streams[k] = m.stream_id;
        handlers[k] = m.handler_name;
        types[k] = m.message_type;
        envelopes[k] = m.envelope;
        metadata[k] = m.metadata.value_or(0);
        metadata_nulls[k] = !m.metadata;
        scopes[k] = m.scope.value_or(0);
        scope_nulls[k] = !m.scope;
        is_event[k] = m.is_event;
        sent[k] = m.sent_at;
        due[k] = m.scheduled_for.value_or(o.now);
        partitions[k] = core::partition_of(m.stream_id.value_or(m.id), o.partition_count);
        auto s = seq.find(fresh[k]);
        if (s != seq.end()) seqs[k] = s->second;
        // Only rows the instance would be handed now anyway: due, and with no other unfinished
        // row in their stream — the first new row of an idle stream. The rows after it wait
        // for it like any follower.
        const bool due_now = due[k] <= o.now;
        pre_leased[k] = o.instance && due_now && !(m.stream_id && busy.count(*m.stream_id));
        if (m.stream_id) busy.insert(*m.stream_id);
    }

    insert_messages_plan.execute({consumer, TimestampTzGetDatum(o.now), uuid_array(ids), text_array(handlers),
                                  text_array(types), datum_array(envelopes, no_nulls, JSONBOID),
                                  datum_array(metadata, metadata_nulls, JSONBOID), datum_array(scopes, scope_nulls, JSONBOID),
                                  uuid_array(streams), bool_array(is_event), optional_timestamptz_array(sent)});
    std::vector<Datum> seq_values(n);
    std::vector<char> seq_nulls(n);
    for (std::size_t k = 0; k < n; ++k) {
        seq_nulls[k] = !seqs[k];
        seq_values[k] = seqs[k] ? Int64GetDatum(*seqs[k]) : (Datum)0;
    }
    const char nulls[] = {' ', o.instance ? ' ' : 'n', o.instance ? ' ' : 'n', o.instance ? ' ' : 'n',
                          ' ', ' ', ' ', ' ', ' ', ' ', '\0'};
    insert_work_plan.execute({consumer, o.instance ? PointerGetDatum(o.instance->data()) : (Datum)0,
                              Int64GetDatum(token), TimestampTzGetDatum(o.lease_expiry), uuid_array(ids),
                              uuid_array(streams), datum_array(seq_values, seq_nulls, INT8OID), int4_array(partitions),
                              timestamptz_array(due), bool_array(pre_leased)},
                             nulls);
    if (o.instance) {
        std::vector<core::Uuid> leased;
        for (std::size_t k = 0; k < n; ++k)
            if (pre_leased[k]) leased.push_back(ids[k]);
        if (!leased.empty())
            insert_preleased_plan.execute({PointerGetDatum(o.instance->data()), consumer, Int64GetDatum(token),
                                           uuid_array(leased)});
    }
}

std::vector<core::DedupOutcome> store(const StoreOptions& o, const std::vector<InboxMessage>& messages) {
    SpiConnection spi;
    std::vector<core::DedupElement> elements(messages.size());
    std::vector<std::optional<TimestampTz>> sent_at(messages.size());
    for (std::size_t i = 0; i < messages.size(); ++i) {
        elements[i].id = messages[i].id;
        elements[i].fingerprint = messages[i].fingerprint;
        sent_at[i] = messages[i].sent_at;
    }
    std::vector<core::DedupOutcome> outcomes = record_deliveries(o.function_name, o.consumer, elements, sent_at, o.now);
    std::vector<std::size_t> fresh;
    for (std::size_t i = 0; i < outcomes.size(); ++i)
        if (outcomes[i] == core::DedupOutcome::fresh) fresh.push_back(i);
    if (!fresh.empty()) insert_new(o, messages, fresh);
    spi.finish();
    return outcomes;
}

CachedPlan dead_letters_plan(
    "SELECT d.dead_letter_id, d.consumer::pg_catalog.text, d.message_id, d.handler_name, d.message_type, d.envelope,"
    "       d.metadata, d.scope, d.stream_id, d.is_event, d.sent_at"
    "  FROM whizbang.wh_dead_letters d"
    " WHERE d.dead_letter_id OPERATOR(pg_catalog.=) ANY ($1) AND d.source OPERATOR(pg_catalog.=) 'inbox'"
    "   AND NOT EXISTS (SELECT 1 FROM whizbang.wh_inbox i WHERE i.message_id OPERATOR(pg_catalog.=) d.message_id"
    "                     AND i.consumer OPERATOR(pg_catalog.=) d.consumer)"
    " ORDER BY d.dead_letter_id FOR UPDATE OF d",
    {INT8ARRAYOID});

CachedPlan forget_dead_letters_plan(
    "DELETE FROM whizbang.wh_dead_letters WHERE dead_letter_id OPERATOR(pg_catalog.=) ANY ($1)", {INT8ARRAYOID});




}  // namespace
}  // namespace whizbang::pg

using namespace whizbang;
using namespace whizbang::pg;

// store_inbox_messages(p_messages, p_instance_id, p_lease_expiry, p_now, p_partition_count, p_consumer)
//   RETURNS TABLE(message_id uuid, stream_id uuid, was_newly_created boolean): new messages only
WB_FUNCTION(wb_store_inbox_messages) {
    StoreOptions o;
    if (!PG_ARGISNULL(1)) o.instance = uuid_from_datum(PG_GETARG_DATUM(1));
    o.now = timestamptz_arg(fcinfo, 3, "p_now");
    o.partition_count = positive_int_arg(fcinfo, 4, "p_partition_count");
    o.consumer = consumer_arg(fcinfo, 5);
    o.lease_expiry = PG_ARGISNULL(2) ? add_to_timestamp(o.now, kDefaultLeaseUs, "the lease expiry")
                                     : timestamptz_arg(fcinfo, 2, "p_lease_expiry");
    // No fingerprints here (the seed's contract, and the hot ingest path): a message stored
    // this way is on record without one, so a later inbox_receive of its id is a duplicate.
    std::vector<InboxMessage> messages = parse_messages(fcinfo, false);

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (messages.empty()) return (Datum)0;
    std::vector<core::DedupOutcome> outcomes = store(o, messages);

    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_call([&] {
        for (std::size_t i = 0; i < messages.size(); ++i) {
            if (outcomes[i] != core::DedupOutcome::fresh) continue;
            Datum values[3] = {PointerGetDatum(messages[i].id.data()),
                               messages[i].stream_id ? PointerGetDatum(messages[i].stream_id->data()) : (Datum)0,
                               BoolGetDatum(true)};
            bool nulls[3] = {false, !messages[i].stream_id, false};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
    });
    return (Datum)0;
}

// retry_dead_letters(p_dead_letter_ids bigint[]) RETURNS int: dead letters back as fresh work
// (attempts 0, due now, at the end of their stream); the dedup record was never removed, so a
// redelivery of the same id is still a duplicate.
WB_FUNCTION(wb_retry_dead_letters) {
    auto ids = int8_array_arg(fcinfo, 0, "p_dead_letter_ids");
    if (!ids || ids->empty()) PG_RETURN_INT32(0);
    std::vector<int64_t> wanted;
    for (std::size_t i = 0; i < ids->size(); ++i) {
        if (!(*ids)[i])
            throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED, "p_dead_letter_ids[" + std::to_string(i + 1) + "] must not be null");
        wanted.push_back(*(*ids)[i]);
    }
    SpiConnection spi;
    uint64 rows = dead_letters_plan.execute({int8_array(wanted)});
    // Grouped by consumer: each group is stored like a batch of that consumer.
    std::map<std::string, std::vector<InboxMessage>> by_consumer;
    std::vector<int64_t> retried;
    std::set<std::pair<std::string, core::Uuid>> seen;
    for (uint64 r = 0; r < rows; ++r) {
        bool isnull = false, null2 = false;
        std::string consumer = text_from_datum(spi_value(r, 2, &isnull));
        InboxMessage m;
        m.id = uuid_from_datum(spi_value(r, 3, &isnull));
        if (!seen.emplace(consumer, m.id).second) continue;  // the same message dead-lettered twice
        retried.push_back(DatumGetInt64(spi_value(r, 1, &isnull)));
        m.handler_name = text_from_datum(spi_value(r, 4, &isnull));
        m.message_type = text_from_datum(spi_value(r, 5, &isnull));
        m.envelope = spi_value(r, 6, &isnull);
        Datum d = spi_value(r, 7, &null2);
        if (!null2) m.metadata = d;
        d = spi_value(r, 8, &null2);
        if (!null2) m.scope = d;
        d = spi_value(r, 9, &null2);
        if (!null2) m.stream_id = uuid_from_datum(d);
        m.is_event = DatumGetBool(spi_value(r, 10, &isnull));
        d = spi_value(r, 11, &null2);
        if (!null2) m.sent_at = DatumGetTimestampTz(d);
        by_consumer[consumer].push_back(std::move(m));
    }
    for (const auto& [consumer, messages] : by_consumer) {
        StoreOptions o;
        o.consumer = consumer;
        o.now = GetCurrentTransactionStartTimestamp();
        std::vector<std::size_t> all(messages.size());
        for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
        insert_new(o, messages, all);
    }
    if (!retried.empty()) forget_dead_letters_plan.execute({int8_array(retried)});
    spi.finish();
    PG_RETURN_INT32(static_cast<int32>(retried.size()));
}

// inbox_receive(p_messages, p_consumer, p_now, p_partition_count)
//   RETURNS TABLE(message_id uuid, stream_id uuid, outcome text): one row per input, input order
WB_FUNCTION(wb_inbox_receive) {
    StoreOptions o;
    o.function_name = "inbox_receive";
    o.consumer = consumer_arg(fcinfo, 1);
    o.now = timestamptz_arg(fcinfo, 2, "p_now");
    o.partition_count = positive_int_arg(fcinfo, 3, "p_partition_count");
    std::vector<InboxMessage> messages = parse_messages(fcinfo, true);

    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    if (messages.empty()) return (Datum)0;
    std::vector<core::DedupOutcome> outcomes = store(o, messages);

    Datum words[4];
    for (auto o : {core::DedupOutcome::fresh, core::DedupOutcome::duplicate, core::DedupOutcome::conflict,
                   core::DedupOutcome::expired})
        words[static_cast<int>(o)] = text_datum(core::outcome_word(o));
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    pg_call([&] {
        for (std::size_t i = 0; i < messages.size(); ++i) {
            Datum values[3] = {PointerGetDatum(messages[i].id.data()),
                               messages[i].stream_id ? PointerGetDatum(messages[i].stream_id->data()) : (Datum)0,
                               words[static_cast<int>(outcomes[i])]};
            bool nulls[3] = {false, !messages[i].stream_id, false};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
    });
    return (Datum)0;
}
