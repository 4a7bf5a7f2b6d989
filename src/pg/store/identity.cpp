// Identity helpers (DESIGN §3.1): fingerprint, event_uuid, uuid_v7, partition_of.
#include <cstring>

#include "core/canonical_json.h"
#include "core/partition.h"
#include "core/uuid.h"
#include "pg/boundary/args.h"

using namespace whizbang;
using namespace whizbang::pg;

namespace {

// Epoch of PostgreSQL timestamps (2000-01-01) in Unix milliseconds.
constexpr int64_t kPostgresEpochUnixMs = 946684800000LL;

core::UuidV7Generator& backend_generator() {
    static core::UuidV7Generator generator;  // one per backend: values are monotonic within it
    return generator;
}

Datum bytea_datum(const unsigned char* data, std::size_t len) {
    return pg_call([&] {
        bytea* out = static_cast<bytea*>(palloc(VARHDRSZ + len));
        SET_VARSIZE(out, VARHDRSZ + len);
        memcpy(VARDATA(out), data, len);
        return PointerGetDatum(out);
    });
}

}  // namespace

// fingerprint(p_payload jsonb, p_ignore_paths text[]) RETURNS bytea; NULL payload -> NULL
WB_ROUTED_FUNCTION(wb_fingerprint, local) {
    if (PG_ARGISNULL(0)) PG_RETURN_NULL();
    auto paths = text_array_arg(fcinfo, 1, "p_ignore_paths");
    Jsonb* jb = pg_call([&] { return PG_GETARG_JSONB_P(0); });
    if (json_too_deep(&jb->root, VARSIZE(jb))) json_too_deep_error("p_payload");
    char* json = pg_call([&] { return JsonbToCString(nullptr, &jb->root, VARSIZE(jb)); });
    core::Sha256Digest digest = core::fingerprint(json, paths ? *paths : std::vector<std::string>{});
    return bytea_datum(digest.data(), digest.size());
}

// event_uuid(p_source text, p_id text) RETURNS uuid (STRICT)
WB_ROUTED_FUNCTION(wb_event_uuid, local) {
    std::string source = text_arg(fcinfo, 0, "p_source");
    std::string id = text_arg(fcinfo, 1, "p_id");
    return uuid_to_datum(core::event_uuid(source, id));
}

// uuid_v7(p_at timestamptz) RETURNS uuid
WB_ROUTED_FUNCTION(wb_uuid_v7, local) {
    TimestampTz at = timestamptz_arg(fcinfo, 0, "p_at");
    // Floor division: a time before 1970 must not round towards zero.
    int64_t ms = at / 1000 - ((at % 1000) < 0 ? 1 : 0) + kPostgresEpochUnixMs;
    if (ms < 0) throw SqlError(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE, "p_at must not be before 1970-01-01");
    std::array<std::uint8_t, 10> random{};
    pg_call([&] {
        if (!pg_strong_random(random.data(), random.size()))
            ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not generate random bytes")));
    });
    return uuid_to_datum(backend_generator().next(ms, random));
}

// partition_of(p_stream_id uuid, p_partition_count int) RETURNS int (STRICT)
WB_ROUTED_FUNCTION(wb_partition_of, local) {
    core::Uuid stream = uuid_from_datum(PG_GETARG_DATUM(0));
    int32 count = PG_GETARG_INT32(1);
    if (count < 1)
        throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                       "p_partition_count must be at least 1, got " + std::to_string(count));
    PG_RETURN_INT32(core::partition_of(stream, count));
}
