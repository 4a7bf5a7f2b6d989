#include "pg/boundary/arrays.h"

#include <cstring>

namespace whizbang::pg {

Datum datum_array(const std::vector<Datum>& values, const std::vector<char>& nulls, Oid element_type) {
    return pg_call([&] {
        int16 typlen;
        bool typbyval;
        char typalign;
        get_typlenbyvalalign(element_type, &typlen, &typbyval, &typalign);
        int dims[1] = {static_cast<int>(values.size())};
        int lbs[1] = {1};
        return PointerGetDatum(construct_md_array(const_cast<Datum*>(values.data()),
                                                  reinterpret_cast<bool*>(const_cast<char*>(nulls.data())), 1, dims,
                                                  lbs, element_type, typlen, typbyval, typalign));
    });
}

namespace {

template <typename T, typename F>
Datum build(const std::vector<T>& in, Oid type, F to_datum) {
    std::vector<Datum> values(in.size());
    std::vector<char> nulls(in.size(), 0);
    for (std::size_t i = 0; i < in.size(); ++i) {
        std::optional<Datum> d = to_datum(in[i]);
        if (d) values[i] = *d;
        else nulls[i] = 1;
    }
    return datum_array(values, nulls, type);
}

}  // namespace

// uuid is a fixed-length pass-by-reference type: its datum points at the 16 bytes.
Datum uuid_array(const std::vector<core::Uuid>& ids) {
    return build(ids, UUIDOID, [](const core::Uuid& u) -> std::optional<Datum> { return PointerGetDatum(u.data()); });
}

Datum uuid_array(const std::vector<std::optional<core::Uuid>>& ids) {
    return build(ids, UUIDOID, [](const std::optional<core::Uuid>& u) -> std::optional<Datum> {
        if (!u) return std::nullopt;
        return PointerGetDatum(u->data());
    });
}

Datum int4_array(const std::vector<int>& values) {
    return build(values, INT4OID, [](int v) -> std::optional<Datum> { return Int32GetDatum(v); });
}

Datum nullable_int4_array(const std::vector<std::optional<int>>& values) {
    return build(values, INT4OID, [](const std::optional<int>& v) -> std::optional<Datum> {
        if (!v) return std::nullopt;
        return Int32GetDatum(*v);
    });
}

Datum int8_array(const std::vector<int64_t>& values) {
    return build(values, INT8OID, [](int64_t v) -> std::optional<Datum> { return Int64GetDatum(v); });
}

Datum bool_array(const std::vector<char>& values) {
    return build(values, BOOLOID, [](char v) -> std::optional<Datum> { return BoolGetDatum(v != 0); });
}

Datum text_datum(const std::string& s) {
    return pg_call([&] { return PointerGetDatum(cstring_to_text_with_len(s.data(), static_cast<int>(s.size()))); });
}

Datum text_array(const std::vector<std::string>& values) {
    return build(values, TEXTOID, [](const std::string& s) -> std::optional<Datum> { return text_datum(s); });
}

Datum nullable_text_array(const std::vector<std::optional<std::string>>& values) {
    return build(values, TEXTOID, [](const std::optional<std::string>& s) -> std::optional<Datum> {
        if (!s) return std::nullopt;
        return text_datum(*s);
    });
}

Datum bytea_array(const std::vector<const std::string*>& values) {
    return build(values, BYTEAOID, [](const std::string* s) -> std::optional<Datum> {
        if (s == nullptr) return std::nullopt;
        return pg_call([&] {
            bytea* b = static_cast<bytea*>(palloc(VARHDRSZ + s->size()));
            SET_VARSIZE(b, VARHDRSZ + s->size());
            memcpy(VARDATA(b), s->data(), s->size());
            return PointerGetDatum(b);
        });
    });
}

Datum timestamptz_array(const std::vector<TimestampTz>& values) {
    return build(values, TIMESTAMPTZOID, [](TimestampTz t) -> std::optional<Datum> { return TimestampTzGetDatum(t); });
}

Datum optional_timestamptz_array(const std::vector<std::optional<TimestampTz>>& values) {
    return build(values, TIMESTAMPTZOID, [](const std::optional<TimestampTz>& t) -> std::optional<Datum> {
        if (!t) return std::nullopt;
        return TimestampTzGetDatum(*t);
    });
}

std::vector<int> int4_array_values(Datum array) {
    std::vector<int> out;
    pg_call([&] {
        Datum* elems = nullptr;
        bool* nulls = nullptr;
        int n = 0;
        deconstruct_array(DatumGetArrayTypeP(array), INT4OID, 4, true, TYPALIGN_INT, &elems, &nulls, &n);
        out.reserve(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i)
            if (!nulls[i]) out.push_back(DatumGetInt32(elems[i]));
    });
    return out;
}

std::vector<int64_t> int8_array_values(Datum array) {
    std::vector<int64_t> out;
    pg_call([&] {
        Datum* elems = nullptr;
        bool* nulls = nullptr;
        int n = 0;
        deconstruct_array(DatumGetArrayTypeP(array), INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, &nulls, &n);
        out.reserve(static_cast<std::size_t>(n));
        for (int i = 0; i < n; ++i)
            if (!nulls[i]) out.push_back(DatumGetInt64(elems[i]));
    });
    return out;
}

}  // namespace whizbang::pg
