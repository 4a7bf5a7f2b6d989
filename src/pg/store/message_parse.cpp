// Reading p_messages: one pass over the jsonb's binary container (no text round trip).
#include <cstring>

#include "core/canonical_json.h"
#include "core/field_names.h"
#include "pg/boundary/args.h"
#include "pg/boundary/memory.h"
#include "pg/store/message_parse.h"

namespace whizbang::pg {
namespace {

constexpr const char* kElementHint = "Elements are numbered from 0, as jsonb's -> operator numbers them.";

// Unknown keys of one call found not to be near misses. The elements of a batch mostly share
// their keys, so each distinct unknown key is measured against the known fields about once.
struct IgnoredKeys {
    static constexpr std::size_t kMax = 32;
    std::vector<std::string> keys;
};

// One element of p_messages while it is read.
struct Element {
    JsonbContainer* object;
    std::size_t index;
    const std::vector<std::string_view>* known;  // the fields of its kind (core/field_names.h)
    IgnoredKeys* ignored;
    std::size_t present = 0;  // of the known fields, how many it has (JSON null included)
    // The value field_of found last, valid until its next call. Filled in place: a palloc'd
    // JsonbValue per field would stay in the call's context, ~350 bytes per message.
    JsonbValue value{};
};

std::string element_name(std::size_t index) { return "p_messages[" + std::to_string(index) + "]"; }

// 22023 when the element has a key that is not one of its known fields but a near miss of one
// (DESIGN §3.2): a typo must not be silently ignored (`ScheduleFor` would run the message at
// once). Other unknown keys are ignored.
void reject_near_misses(const Element& e) {
    auto in = [](std::string_view key, const auto& list) {
        for (const auto& k : list)
            if (key == k) return true;
        return false;
    };
    // An object's keys are its first JsonContainerSize() children, stored as plain strings
    // before the values: read in place, without an iterator or a copy.
    const uint32 pairs = JsonContainerSize(e.object);
    const char* data = reinterpret_cast<const char*>(&e.object->children[pairs * 2]);
    for (uint32 i = 0; i < pairs; ++i) {
        const std::string_view key(data + getJsonbOffset(e.object, static_cast<int>(i)),
                                   getJsonbLength(e.object, static_cast<int>(i)));
        if (in(key, *e.known) || in(key, e.ignored->keys)) continue;
        if (std::optional<std::string_view> meant = core::near_miss(key, *e.known))
            throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                           element_name(e.index) + " has the unknown field " + core::quoted_excerpt(key), {},
                           "Did you mean \"" + std::string(*meant) + "\"? " + kElementHint);
        if (e.ignored->keys.size() < IgnoredKeys::kMax && key.size() <= 64) e.ignored->keys.emplace_back(key);
    }
}

[[noreturn]] void bad_field(std::size_t index, const char* field, const std::string& what) {
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, element_name(index) + "." + field + " " + what, {}, kElementHint);
}

// A required field is missing: when that is because of a misspelt key, say so instead.
[[noreturn]] void missing_field(const Element& e, const char* field) {
    reject_near_misses(e);
    bad_field(e.index, field, "is required");
}

// The value of `field` in the element object, nullptr when absent or JSON null; valid until the
// next field_of of the element (it is e.value).
JsonbValue* field_of(Element& e, const char* field) {
    JsonbValue* v = pg_call([&]() -> JsonbValue* {
        return getKeyJsonValueFromContainer(e.object, field, static_cast<int>(strlen(field)), &e.value);
    });
    if (v == nullptr) return nullptr;
    ++e.present;
    return v->type == jbvNull ? nullptr : v;
}

std::string string_field(Element& e, const char* field) {
    JsonbValue* v = field_of(e, field);
    if (v == nullptr) missing_field(e, field);
    if (v->type != jbvString) bad_field(e.index, field, "must be a string");
    if (v->val.string.len == 0) bad_field(e.index, field, "must not be empty");
    return std::string(v->val.string.val, v->val.string.len);
}

std::optional<core::Uuid> uuid_field(Element& e, const char* field, bool required) {
    JsonbValue* v = field_of(e, field);
    if (v == nullptr) {
        if (required) missing_field(e, field);
        return std::nullopt;
    }
    if (v->type != jbvString) bad_field(e.index, field, "must be a uuid string");
    std::string_view text(v->val.string.val, v->val.string.len);
    auto id = core::parse_uuid(text);
    if (!id) bad_field(e.index, field, "is not a valid uuid: " + core::quoted_excerpt(text));
    return id;
}

std::optional<TimestampTz> timestamp_field(Element& e, const char* field) {
    JsonbValue* v = field_of(e, field);
    if (v == nullptr) return std::nullopt;
    if (v->type != jbvString) bad_field(e.index, field, "must be a timestamp string");
    std::string text(v->val.string.val, v->val.string.len);
    TimestampTz ts;
    try {
        ts = pg_call([&] {
            return DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(text.c_str()),
                                                           ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
        });
    } catch (const PgError&) {
        bad_field(e.index, field, "is not a valid timestamp: " + core::quoted_excerpt(text));
    }
    if (TIMESTAMP_NOT_FINITE(ts)) bad_field(e.index, field, "must be a finite timestamp");
    return ts;
}

// A JSON value stored as jsonb, within the nesting limit every whizbang function applies
// (inbox_receive fingerprints envelopes; the stores must not accept what it refuses).
std::optional<Datum> jsonb_field(Element& e, const char* field) {
    JsonbValue* v = field_of(e, field);
    if (v == nullptr) return std::nullopt;
    if (v->type == jbvBinary && json_too_deep(v->val.binary.data, v->val.binary.len))
        json_too_deep_error(element_name(e.index) + "." + field);
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
    note_batch(count, VARSIZE(batch));  // a big batch trims at transaction end (pg/memory.h)
    const std::vector<std::string_view>& known = source == Source::inbox ? core::inbox_fields() : core::outbox_fields();

    IgnoredKeys ignored;
    std::vector<Message> messages(count);
    for (std::size_t i = 0; i < count; ++i) {
        JsonbValue* element = pg_call([&] { return getIthJsonbValueFromContainer(&batch->root, static_cast<uint32>(i)); });
        if (element->type != jbvBinary || !JsonContainerIsObject(element->val.binary.data))
            throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, element_name(i) + " must be an object");
        Element e{element->val.binary.data, i, &known, &ignored};
        Message& m = messages[i];
        m.id = *uuid_field(e, "MessageId", true);
        m.target = string_field(e, source == Source::inbox ? "HandlerName" : "Destination");
        m.message_type = string_field(e, "MessageType");
        std::optional<Datum> envelope = jsonb_field(e, "Envelope");
        if (!envelope) missing_field(e, "Envelope");
        m.envelope = *envelope;
        m.metadata = jsonb_field(e, "Metadata");
        m.scope = jsonb_field(e, "Scope");
        m.stream_id = uuid_field(e, "StreamId", false);
        if (JsonbValue* v = field_of(e, "IsEvent")) {
            if (v->type != jbvBool) bad_field(i, "IsEvent", "must be true, false or null");
            m.is_event = v->val.boolean;
        }
        if (source == Source::inbox) m.sent_at = timestamp_field(e, "SentAt");
        m.scheduled_for = timestamp_field(e, "ScheduledFor");
        // Every known field was looked up once: only an element with other keys is read again.
        if (e.present != JsonContainerSize(e.object)) reject_near_misses(e);
        if (with_fingerprints) {
            char* text = pg_call([&] {
                Jsonb* jb = DatumGetJsonbP(m.envelope);
                return JsonbToCString(nullptr, &jb->root, VARSIZE(jb));
            });
            core::Sha256Digest digest = core::fingerprint(text);
            // JsonbToCString starts at 1 KB: kept to the end of the call, 200 MB per 200,000 messages.
            pg_call([&] { pfree(text); });
            m.fingerprint.emplace(reinterpret_cast<const char*>(digest.data()), digest.size());
        }
        if ((i & 1023) == 0) pg_call([] { CHECK_FOR_INTERRUPTS(); });
    }
    return messages;
}

void put_message_row(ReturnSetInfo* rsinfo, const Message& m, Datum third) {
    Datum values[3] = {PointerGetDatum(m.id.data()), m.stream_id ? PointerGetDatum(m.stream_id->data()) : (Datum)0,
                       third};
    bool nulls[3] = {false, !m.stream_id, false};
    tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

}  // namespace whizbang::pg
