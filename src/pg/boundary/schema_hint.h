// A hint on PostgreSQL's own "permission denied for schema whizbang" (issue 30). PostgreSQL
// raises it while it parses a call, before any whizbang code runs, so no function of the
// extension can answer it; the library adds the hint as the error is reported (emit_log_hook),
// in every backend that has loaded it: with whizbang in shared_preload_libraries, every backend.
#pragma once

namespace whizbang::pg {

// Installs the hook (once; the hook before it is kept and called).
void install_schema_hint();

}  // namespace whizbang::pg
