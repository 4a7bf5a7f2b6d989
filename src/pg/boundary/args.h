// Reading SQL arguments into C++ values, with the errors DESIGN §1.4 asks for: a NULL or
// malformed element is named by parameter and subscript, with a proper SQLSTATE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/excerpt.h"
#include "core/uuid.h"
#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// More elements than this in one call is refused (54000), so memory stays bounded.
constexpr std::size_t kMaxBatchElements = 1000000;

core::Uuid uuid_from_datum(Datum d);
std::string text_from_datum(Datum d);
Datum uuid_to_datum(const core::Uuid& u);

// A required scalar: NULL raises 22004 naming the parameter.
void require_not_null(FunctionCallInfo fcinfo, int argno, const char* name);
std::string text_arg(FunctionCallInfo fcinfo, int argno, const char* name);
// A required integer of at least 1 (22004 when NULL, 22023 below 1).
int positive_int_arg(FunctionCallInfo fcinfo, int argno, const char* name);
TimestampTz timestamptz_arg(FunctionCallInfo fcinfo, int argno, const char* name);

// An interval in microseconds (a month is 30 days); 22015 when that overflows. NULL: nullopt.
int64_t interval_us(const Interval* iv, const char* name);
std::optional<int64_t> interval_arg(FunctionCallInfo fcinfo, int argno, const char* name);

// The array argument `argno` (not NULL), checked: one-dimensional (else 2202E), of
// `element_type` (else 42804), at most kMaxBatchElements elements (else 54000).
ArrayType* array_arg(FunctionCallInfo fcinfo, int argno, const char* name, Oid element_type);

// A one-dimensional array argument. `required`: a NULL array raises 22004; otherwise a NULL
// array reads as std::nullopt. Elements that are NULL raise 22004 unless the element type
// is optional (or, for uuid arrays, `skip_nulls` leaves them out).
std::optional<std::vector<core::Uuid>> uuid_array_arg(FunctionCallInfo fcinfo, int argno, const char* name,
                                                     bool required, bool skip_nulls = false);
std::optional<std::vector<std::optional<std::string>>> bytea_array_arg(FunctionCallInfo fcinfo, int argno,
                                                                       const char* name);
std::optional<std::vector<std::optional<TimestampTz>>> timestamptz_array_arg(FunctionCallInfo fcinfo, int argno,
                                                                             const char* name);
std::optional<std::vector<std::string>> text_array_arg(FunctionCallInfo fcinfo, int argno, const char* name);
std::optional<std::vector<std::optional<std::string>>> nullable_text_array_arg(FunctionCallInfo fcinfo, int argno,
                                                                              const char* name);
std::optional<std::vector<std::optional<int64_t>>> int8_array_arg(FunctionCallInfo fcinfo, int argno, const char* name);
std::optional<std::vector<std::optional<bool>>> bool_array_arg(FunctionCallInfo fcinfo, int argno, const char* name);

// `base` plus `us` microseconds; 22008 when the result is past the timestamp range, so an
// unreadable time is never stored.
TimestampTz add_to_timestamp(TimestampTz base, int64_t us, const char* what);

// p_lease_expiry of the pre-leasing stores: NULL is `now` + the default lease; with an instance
// (`leased`) it must be later than `now` (22023), since an expired pre-lease would store work
// that anyone may claim at once under a token nobody was given. Without one it is ignored.
TimestampTz lease_expiry_arg(FunctionCallInfo fcinfo, int argno, TimestampTz now, int64_t default_us, bool leased);

// Whether `container` (of `bytes` bytes) nests arrays and objects deeper than
// core::kMaxJsonDepth. Reads only documents big enough to nest that deep (about 80 kB: each
// level takes at least 8 bytes), so ordinary envelopes cost one comparison.
bool json_too_deep(JsonbContainer* container, std::size_t bytes);
// 54000: `what` (p_payload, p_messages[3].Envelope) nests deeper than core::kMaxJsonDepth.
[[noreturn]] void json_too_deep_error(const std::string& what);

// 22023 unless an optional array has the same length as the leading one (a NULL leading array
// having been read as empty: complete_work('inbox', NULL, '{1}') names one token for no id).
void require_same_length(std::size_t expected, const char* leading, std::size_t actual, const char* name);

}  // namespace whizbang::pg
