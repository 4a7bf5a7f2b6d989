// Effective values of whizbang's settings (wh_settings over the shipped defaults).
#pragma once

#include <string>

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// Needs an open SpiConnection. Unknown keys are a bug in whizbang, reported as XX000.
std::string setting_text(const char* key);
int64_t setting_int(const char* key);
bool setting_bool(const char* key);

}  // namespace whizbang::pg
