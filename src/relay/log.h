// whizbang-relay's log: one line per event on stderr, UTC timestamp first, so that a service
// manager's journal and a plain redirect read the same. stdout stays free for ndjson:-.
#pragma once

#include <string>

namespace whizbang::relay {

void log_line(const char* level, const std::string& message);
inline void log_info(const std::string& message) { log_line("LOG", message); }
inline void log_warning(const std::string& message) { log_line("WARNING", message); }
inline void log_error(const std::string& message) { log_line("ERROR", message); }
inline void log_fatal(const std::string& message) { log_line("FATAL", message); }

}  // namespace whizbang::relay
