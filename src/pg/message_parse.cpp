// Reading p_messages: one pass over the jsonb's binary container (no text round trip).
#include <cstring>

#include "core/canonical_json.h"
#include "pg/args.h"
#include "pg/message_parse.h"

namespace whizbang::pg {
namespace {

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

}  // namespace

std::vector<Message> parse_messages(FunctionCallInfo fcinfo, Source source, bool with_fingerprints) {
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

    std::vector<Message> messages(count);
    for (std::size_t i = 0; i < count; ++i) {
        JsonbValue* element = pg_call([&] { return getIthJsonbValueFromContainer(&batch->root, static_cast<uint32>(i)); });
        if (element->type != jbvBinary || !JsonContainerIsObject(element->val.binary.data))
            throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "p_messages[" + std::to_string(i) + "] must be an object");
        JsonbContainer* object = element->val.binary.data;
        Message& m = messages[i];
        m.id = *uuid_field(object, i, "MessageId", true);
        m.target = string_field(object, i, source == Source::inbox ? "HandlerName" : "Destination");
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
        if (source == Source::inbox) m.sent_at = timestamp_field(object, i, "SentAt");
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

}  // namespace whizbang::pg
