// Building SQL array parameters for set-based SPI statements (one statement per batch,
// unnest() on the server side).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/uuid.h"
#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// A one-dimensional array of `element_type` from datums; nulls[i] marks a NULL element.
Datum datum_array(const std::vector<Datum>& values, const std::vector<char>& nulls, Oid element_type);

Datum uuid_array(const std::vector<core::Uuid>& ids);
Datum uuid_array(const std::vector<std::optional<core::Uuid>>& ids);
Datum int4_array(const std::vector<int>& values);
Datum nullable_int4_array(const std::vector<std::optional<int>>& values);
// The elements of an int4[], NULLs left out.
std::vector<int> int4_array_values(Datum array);
std::vector<int64_t> int8_array_values(Datum array);
Datum int8_array(const std::vector<int64_t>& values);
Datum bool_array(const std::vector<char>& values);
Datum text_array(const std::vector<std::string>& values);
Datum nullable_text_array(const std::vector<std::optional<std::string>>& values);
Datum bytea_array(const std::vector<const std::string*>& values);  // nullptr: NULL
Datum timestamptz_array(const std::vector<TimestampTz>& values);
Datum optional_timestamptz_array(const std::vector<std::optional<TimestampTz>>& values);

Datum text_datum(const std::string& s);

}  // namespace whizbang::pg
