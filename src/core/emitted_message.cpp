#include "emitted_message.h"

#include <cstdio>

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

namespace {

// Days since 1970-01-01 to a civil date (Howard Hinnant's days_from_civil, inverted).
void civil_from_days(std::int64_t z, int& y, unsigned& m, unsigned& d) {
    z += 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const auto doe = static_cast<unsigned>(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    d = doy - (153 * mp + 2) / 5 + 1;
    m = mp < 10 ? mp + 3 : mp - 9;
    y = static_cast<int>(yoe + era * 400 + (m <= 2 ? 1 : 0));
}

}  // namespace

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
