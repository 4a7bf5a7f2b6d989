#include <string>
#include <unordered_map>

#include <optional>

#include "pg/boundary/args.h"
#include "pg/boundary/owner.h"
#include "pg/citus/distributed.h"
#include "pg/boundary/settings.h"
#include "pg/citus/shard_scope.h"
#include "pg/boundary/spi.h"
#include "pg/boundary/table_cache.h"

namespace whizbang::pg {
namespace {

std::unordered_map<std::string, std::string> effective;  // setting_key -> value

void forget() { effective.clear(); }

TableCache cache("wh_settings", forget);

CachedPlan all_settings("SELECT setting_key, value FROM whizbang.settings", {});
// The view spelled out, for a routed call on a Citus node: there the tables are renamed to the
// node's placements (shard_scope.h), which a view's text cannot be. Unlike the view it reads
// the tables with the caller's rights (docs/scaleout.md, grants).
CachedPlan all_settings_on_shard(
    "SELECT d.setting_key, COALESCE(s.setting_value, d.default_value)"
    "  FROM whizbang.wh_setting_defaults d"
    "  LEFT JOIN whizbang.wh_settings s ON s.setting_key OPERATOR(pg_catalog.=) d.setting_key",
    {});


}  // namespace

std::string setting_text(const char* key) {
    if (!cache.fresh()) {
        // On a Citus install the view's reference tables are read through Citus, which checks
        // the caller's rights on their placements: whizbang reads its settings as the owner
        // there (docs/scaleout.md "Grants"); on one server as the caller, as documented.
        std::optional<AsExtensionOwner> owner;
        if (distributed()) owner.emplace();
        uint64 rows = (in_shard_scope() ? all_settings_on_shard : all_settings).execute({});
        for (uint64 r = 0; r < rows; ++r) {
            bool key_null = false, value_null = false;
            Datum k = spi_value(r, 1, &key_null);
            Datum v = spi_value(r, 2, &value_null);
            if (!key_null && !value_null) effective[text_from_datum(k)] = text_from_datum(v);
        }
        cache.mark_loaded();
    }
    auto it = effective.find(key);
    if (it == effective.end()) throw SqlError(ERRCODE_INTERNAL_ERROR, std::string("unknown whizbang setting ") + key);
    return it->second;
}

// Values were validated when written (wh_settings trigger), so parsing cannot fail here.
int64_t setting_int(const char* key) { return std::stoll(setting_text(key)); }

bool setting_bool(const char* key) { return setting_text(key) == "true"; }

}  // namespace whizbang::pg

using namespace whizbang::pg;

// _table_changed() RETURNS trigger: the statement trigger of the cached configuration tables.
WB_ROUTED_FUNCTION(wb_table_changed, local) {
    if (!CALLED_AS_TRIGGER(fcinfo))
        throw SqlError(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, "_table_changed() must be called as a trigger");
    Relation rel = reinterpret_cast<TriggerData*>(fcinfo->context)->tg_relation;
    pg_call([&] {
        CacheInvalidateRelcacheByRelid(RelationGetRelid(rel));
        // On a Citus install the trigger fires on each placement of the reference table
        // (wh_settings_102009), where the caches watch the table itself (wh_settings): name it
        // too, so every node's backends drop their copy when the change commits there.
        const char* name = RelationGetRelationName(rel);
        const char* underscore = strrchr(name, '_');
        if (underscore != nullptr && underscore[1] != '\0' && strspn(underscore + 1, "0123456789") == strlen(underscore + 1)) {
            char* base = pnstrdup(name, underscore - name);
            Oid table = get_relname_relid(base, RelationGetNamespace(rel));
            if (OidIsValid(table)) CacheInvalidateRelcacheByRelid(table);
            pfree(base);
        }
    });
    return PointerGetDatum(nullptr);
}
