#include "pg/boundary/schema_hint.h"

#include <cstring>

#include "pg/boundary/postgres_headers.h"

namespace whizbang::pg {
namespace {

emit_log_hook_type previous_hook = nullptr;
bool installed = false;

// Whether the message names schema whizbang: PostgreSQL's text puts the name in (translated or
// not); a schema whose name merely starts with whizbang is another one.
bool names_whizbang(const char* message) {
    for (const char* at = strstr(message, "whizbang"); at != nullptr; at = strstr(at + 1, "whizbang")) {
        const char next = at[8];
        const bool word_ends = !(next == '_' || (next >= 'a' && next <= 'z') || (next >= '0' && next <= '9'));
        const bool word_starts = at == message || at[-1] == ' ' || at[-1] == '"';
        if (word_ends && word_starts) return true;
    }
    return false;
}

// Runs while an error is reported, in ErrorContext: plain C, no catalog access, no error.
void add_schema_hint(ErrorData* edata) {
    if (edata->elevel >= ERROR && edata->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE && edata->hint == nullptr &&
        edata->message_id != nullptr && strcmp(edata->message_id, "permission denied for schema %s") == 0 &&
        edata->message != nullptr && names_whizbang(edata->message))
        edata->hint = pstrdup(
            "A role uses whizbang once it is granted what it does: as the extension's owner, "
            "SELECT whizbang.grant_worker('role', ARRAY['inbox']) (capabilities dedup, idempotency, inbox, outbox, "
            "relay) or SELECT whizbang.grant_admin('role') (docs/security.md).");
    if (previous_hook) previous_hook(edata);
}

}  // namespace

void install_schema_hint() {
    if (installed) return;
    previous_hook = emit_log_hook;
    emit_log_hook = add_schema_hint;
    installed = true;
}

}  // namespace whizbang::pg
