#include "emitted_message.h"

#include <cstdio>

#include "civil_date.h"

namespace whizbang::core {

void append_json_string(std::string& out, std::string_view text) {
    static const char* const kHex = "0123456789abcdef";
    out.push_back('"');
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (u < 0x20) {
                    out += "\\u00";
                    out.push_back(kHex[u >> 4]);
                    out.push_back(kHex[u & 15]);
                } else {
                    out.push_back(c);
                }
        }
    }
    out.push_back('"');
}

std::string utc_timestamp_text(std::int64_t unix_us) {
    constexpr std::int64_t kUsPerDay = 86400LL * 1000000LL;
    std::int64_t days = unix_us / kUsPerDay, rest = unix_us % kUsPerDay;
    if (rest < 0) {
        rest += kUsPerDay;
        days -= 1;
    }
    int y;
    unsigned mo, d;
    civil_from_days(days, y, mo, d);
    const std::int64_t secs = rest / 1000000, us = rest % 1000000;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%06d+00:00", y, mo, d, static_cast<int>(secs / 3600),
                  static_cast<int>(secs / 60 % 60), static_cast<int>(secs % 60), static_cast<int>(us));
    return buf;
}

void append_emitted_json(std::string& out, const EmittedMessage& m) {
    out += "{\"MessageId\":\"";
    out += to_string(m.id);
    out += "\",\"Destination\":";
    append_json_string(out, m.destination);
    out += ",\"MessageType\":";
    append_json_string(out, m.message_type);
    out += ",\"StreamId\":";
    if (m.stream_id) {
        out.push_back('"');
        out += to_string(*m.stream_id);
        out.push_back('"');
    } else {
        out += "null";
    }
    out += m.is_event ? ",\"IsEvent\":true" : ",\"IsEvent\":false";
    out += ",\"Scope\":";
    out += m.scope_json ? *m.scope_json : std::string_view("null");
    out += ",\"Metadata\":";
    out += m.metadata_json ? *m.metadata_json : std::string_view("null");
    out += ",\"Envelope\":";
    out += m.envelope_json;
    out += ",\"CreatedAt\":\"";
    out += utc_timestamp_text(m.created_at_unix_us);
    out += "\"}";
}

}  // namespace whizbang::core
