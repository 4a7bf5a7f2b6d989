#include <cstring>

#include "core/canonical_json.h"
#include "pg/boundary/args.h"
#include "pg/boundary/memory.h"

namespace whizbang::pg {

namespace {

struct Elements {
    Datum* values = nullptr;
    bool* nulls = nullptr;
    int count = 0;
};

// Deconstructs a one-dimensional array of `element_type`.
Elements deconstruct(FunctionCallInfo fcinfo, int argno, const char* name, Oid element_type) {
    ArrayType* array = array_arg(fcinfo, argno, name, element_type);
    Elements out;
    int16 typlen;
    bool typbyval;
    char typalign;
    pg_call([&] {
        get_typlenbyvalalign(element_type, &typlen, &typbyval, &typalign);
        deconstruct_array(array, element_type, typlen, typbyval, typalign, &out.values, &out.nulls, &out.count);
    });
    return out;
}

[[noreturn]] void null_element(const char* name, int index) {
    throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED,
                   std::string(name) + "[" + std::to_string(index + 1) + "] must not be null");
}

}  // namespace

ArrayType* array_arg(FunctionCallInfo fcinfo, int argno, const char* name, Oid element_type) {
    ArrayType* array = pg_call([&] { return PG_GETARG_ARRAYTYPE_P(argno); });
    if (ARR_NDIM(array) > 1)
        throw SqlError(ERRCODE_ARRAY_SUBSCRIPT_ERROR, std::string(name) + " must be a one-dimensional array",
                       "It has " + std::to_string(ARR_NDIM(array)) + " dimensions.");
    if (ARR_ELEMTYPE(array) != element_type)
        throw SqlError(ERRCODE_DATATYPE_MISMATCH, std::string(name) + " has the wrong element type");
    const int count = pg_call([&] { return ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array)); });
    if (static_cast<std::size_t>(count) > kMaxBatchElements)
        throw SqlError(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                       std::string(name) + " has " + std::to_string(count) + " elements, more than the limit of " +
                           std::to_string(kMaxBatchElements) + " per call",
                       {}, "Split the batch into several calls.");
    note_batch(static_cast<std::size_t>(count), VARSIZE_ANY(array));  // a big one trims at transaction end
    return array;
}

core::Uuid uuid_from_datum(Datum d) {
    core::Uuid u;
    memcpy(u.data(), DatumGetUUIDP(d)->data, u.size());
    return u;
}

std::string text_from_datum(Datum d) {
    text* t = pg_call([&] { return DatumGetTextPP(d); });
    return std::string(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

Datum uuid_to_datum(const core::Uuid& u) {
    auto* out = static_cast<pg_uuid_t*>(pg_call([] { return palloc(sizeof(pg_uuid_t)); }));
    memcpy(out->data, u.data(), u.size());
    return UUIDPGetDatum(out);
}

void require_not_null(FunctionCallInfo fcinfo, int argno, const char* name) {
    if (PG_ARGISNULL(argno))
        throw SqlError(ERRCODE_NULL_VALUE_NOT_ALLOWED, std::string(name) + " must not be null");
}

std::string text_arg(FunctionCallInfo fcinfo, int argno, const char* name) {
    require_not_null(fcinfo, argno, name);
    text* t = pg_call([&] { return PG_GETARG_TEXT_PP(argno); });
    return std::string(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

int positive_int_arg(FunctionCallInfo fcinfo, int argno, const char* name) {
    require_not_null(fcinfo, argno, name);
    int v = PG_GETARG_INT32(argno);
    if (v < 1)
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, std::string(name) + " must be at least 1, got " + std::to_string(v));
    return v;
}

TimestampTz timestamptz_arg(FunctionCallInfo fcinfo, int argno, const char* name) {
    require_not_null(fcinfo, argno, name);
    TimestampTz ts = PG_GETARG_TIMESTAMPTZ(argno);
    if (TIMESTAMP_NOT_FINITE(ts))
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, std::string(name) + " must be a finite timestamp");
    return ts;
}

int64_t interval_us(const Interval* iv, const char* name) {
    int64_t days_us = 0, months_us = 0, total = 0;
    if (__builtin_mul_overflow(static_cast<int64_t>(iv->day), USECS_PER_DAY, &days_us) ||
        __builtin_mul_overflow(static_cast<int64_t>(iv->month), DAYS_PER_MONTH * USECS_PER_DAY, &months_us) ||
        __builtin_add_overflow(iv->time, days_us, &total) || __builtin_add_overflow(total, months_us, &total))
        throw SqlError(ERRCODE_INTERVAL_FIELD_OVERFLOW, std::string(name) + " is out of range");
    return total;
}

std::optional<int64_t> interval_arg(FunctionCallInfo fcinfo, int argno, const char* name) {
    if (PG_ARGISNULL(argno)) return std::nullopt;
    return interval_us(PG_GETARG_INTERVAL_P(argno), name);
}

std::optional<std::vector<core::Uuid>> uuid_array_arg(FunctionCallInfo fcinfo, int argno, const char* name,
                                                     bool required, bool skip_nulls) {
    if (PG_ARGISNULL(argno)) {
        if (required) require_not_null(fcinfo, argno, name);
        return std::nullopt;
    }
    Elements e = deconstruct(fcinfo, argno, name, UUIDOID);
    std::vector<core::Uuid> out;
    out.reserve(e.count);
    for (int i = 0; i < e.count; ++i) {
        if (e.nulls[i]) {
            if (skip_nulls) continue;
            null_element(name, i);
        }
        core::Uuid& u = out.emplace_back();
        memcpy(u.data(), DatumGetUUIDP(e.values[i])->data, 16);
    }
    return out;
}

std::optional<std::vector<std::optional<std::string>>> bytea_array_arg(FunctionCallInfo fcinfo, int argno,
                                                                       const char* name) {
    if (PG_ARGISNULL(argno)) return std::nullopt;
    Elements e = deconstruct(fcinfo, argno, name, BYTEAOID);
    std::vector<std::optional<std::string>> out(e.count);
    for (int i = 0; i < e.count; ++i) {
        if (e.nulls[i]) continue;
        bytea* b = pg_call([&] { return DatumGetByteaPP(e.values[i]); });
        out[i].emplace(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
    }
    return out;
}

std::optional<std::vector<std::optional<TimestampTz>>> timestamptz_array_arg(FunctionCallInfo fcinfo, int argno,
                                                                             const char* name) {
    if (PG_ARGISNULL(argno)) return std::nullopt;
    Elements e = deconstruct(fcinfo, argno, name, TIMESTAMPTZOID);
    std::vector<std::optional<TimestampTz>> out(e.count);
    for (int i = 0; i < e.count; ++i)
        if (!e.nulls[i]) out[i] = DatumGetTimestampTz(e.values[i]);
    return out;
}

std::optional<std::vector<std::string>> text_array_arg(FunctionCallInfo fcinfo, int argno, const char* name) {
    if (PG_ARGISNULL(argno)) return std::nullopt;
    Elements e = deconstruct(fcinfo, argno, name, TEXTOID);
    std::vector<std::string> out(e.count);
    for (int i = 0; i < e.count; ++i) {
        if (e.nulls[i]) null_element(name, i);
        text* t = pg_call([&] { return DatumGetTextPP(e.values[i]); });
        out[i].assign(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
    }
    return out;
}

std::optional<std::vector<std::optional<std::string>>> nullable_text_array_arg(FunctionCallInfo fcinfo, int argno,
                                                                              const char* name) {
    if (PG_ARGISNULL(argno)) return std::nullopt;
    Elements e = deconstruct(fcinfo, argno, name, TEXTOID);
    std::vector<std::optional<std::string>> out(e.count);
    for (int i = 0; i < e.count; ++i) {
        if (e.nulls[i]) continue;
        text* t = pg_call([&] { return DatumGetTextPP(e.values[i]); });
        out[i].emplace(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
    }
    return out;
}

std::optional<std::vector<std::optional<int64_t>>> int8_array_arg(FunctionCallInfo fcinfo, int argno, const char* name) {
    if (PG_ARGISNULL(argno)) return std::nullopt;
    Elements e = deconstruct(fcinfo, argno, name, INT8OID);
    std::vector<std::optional<int64_t>> out(e.count);
    for (int i = 0; i < e.count; ++i)
        if (!e.nulls[i]) out[i] = DatumGetInt64(e.values[i]);
    return out;
}

std::optional<std::vector<std::optional<bool>>> bool_array_arg(FunctionCallInfo fcinfo, int argno, const char* name) {
    if (PG_ARGISNULL(argno)) return std::nullopt;
    Elements e = deconstruct(fcinfo, argno, name, BOOLOID);
    std::vector<std::optional<bool>> out(e.count);
    for (int i = 0; i < e.count; ++i)
        if (!e.nulls[i]) out[i] = DatumGetBool(e.values[i]);
    return out;
}

TimestampTz add_to_timestamp(TimestampTz base, int64_t us, const char* what) {
    TimestampTz out;
    if (__builtin_add_overflow(base, us, &out) || !IS_VALID_TIMESTAMP(out))
        throw SqlError(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE, std::string(what) + " is out of the timestamp range");
    return out;
}

TimestampTz lease_expiry_arg(FunctionCallInfo fcinfo, int argno, TimestampTz now, int64_t default_us, bool leased) {
    if (PG_ARGISNULL(argno)) return add_to_timestamp(now, default_us, "p_now + the default lease");
    TimestampTz expiry = timestamptz_arg(fcinfo, argno, "p_lease_expiry");
    if (leased && expiry <= now)
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE, "p_lease_expiry must be later than p_now",
                       {}, "Omit p_lease_expiry for a lease of " + std::to_string(default_us / USECS_PER_SEC) +
                           " seconds, or give a time in the future.");
    return expiry;
}

bool json_too_deep(JsonbContainer* container, std::size_t bytes) {
    // Every level but the innermost is at least a container header and the JEntry of its
    // child, 8 bytes; the innermost at least a header, 4. So nesting kMaxJsonDepth + 1 deep
    // takes at least 8 * kMaxJsonDepth + 4 bytes.
    if (bytes < 8 * core::kMaxJsonDepth + 4) return false;
    return pg_call([container] {
        JsonbIterator* it = JsonbIteratorInit(container);
        JsonbValue v;
        std::size_t depth = 0;
        JsonbIteratorToken token;
        while ((token = JsonbIteratorNext(&it, &v, false)) != WJB_DONE) {
            if (token == WJB_BEGIN_ARRAY || token == WJB_BEGIN_OBJECT) {
                if (++depth > core::kMaxJsonDepth) return true;
            } else if (token == WJB_END_ARRAY || token == WJB_END_OBJECT) {
                --depth;
            }
        }
        return false;
    });
}

void json_too_deep_error(const std::string& what) {
    throw SqlError(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                   what + " nests arrays and objects deeper than " + std::to_string(core::kMaxJsonDepth) + " levels",
                   {}, "whizbang reads JSON nested at most " + std::to_string(core::kMaxJsonDepth) + " levels deep.");
}

void require_same_length(std::size_t expected, const char* leading, std::size_t actual, const char* name) {
    if (expected != actual)
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                       std::string(name) + " has " + std::to_string(actual) + " elements but " + leading + " has " +
                           std::to_string(expected),
                       {}, expected == 0 ? "Array arguments of one call must have equal lengths, and a NULL " +
                                               std::string(leading) + " counts as empty."
                                         : std::string("Array arguments of one call must have equal lengths."));
}

}  // namespace whizbang::pg
