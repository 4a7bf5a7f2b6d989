// Fuzz target: the relay's reader of an emitted message's fields (src/core/outbox_fields.h).
// Any text is either read or refused with InputError: no crash, no other exception. What it
// reads is valid JSON to canonical_json as well (two strict readers of the same grammar), and
// the fields it returns are canonical UUIDs where UUIDs are asked for.
#include <string>

#include "canonical_json.h"
#include "fuzz_check.h"
#include "outbox_fields.h"
#include "uuid.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text = whizbang::fuzz::as_text(data, size);
    whizbang::core::OutboxFields f;
    try {
        f = whizbang::core::read_outbox_fields(text);
    } catch (const whizbang::core::InputError&) {
        return 0;
    }
    try {
        whizbang::core::canonical_json(text);
    } catch (const whizbang::core::InputError& e) {
        FUZZ_CHECK(e.kind() != whizbang::core::InputError::Kind::invalid_json,
                   "what read_outbox_fields accepts is valid JSON to canonical_json");
    }
    const auto id = whizbang::core::parse_uuid(f.message_id);
    FUZZ_CHECK(id && whizbang::core::to_string(*id) == f.message_id, "MessageId is a canonical UUID");
    if (!f.stream_id.empty()) {
        const auto s = whizbang::core::parse_uuid(f.stream_id);
        FUZZ_CHECK(s && whizbang::core::to_string(*s) == f.stream_id, "StreamId is a canonical UUID");
    }
    const std::string line = whizbang::core::single_line(text);
    FUZZ_CHECK(line.find('\n') == std::string::npos && line.size() == text.size(), "single_line keeps one line");
    return 0;
}
