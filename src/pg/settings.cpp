#include "pg/settings.h"

#include "pg/spi.h"

namespace whizbang::pg {

std::string setting_text(const char* key) {
    static CachedPlan plan(
        "SELECT value FROM whizbang.settings WHERE setting_key OPERATOR(pg_catalog.=) $1", {TEXTOID});
    Datum arg = pg_call([&] { return CStringGetTextDatum(key); });
    if (plan.execute({arg}) != 1) throw SqlError(ERRCODE_INTERNAL_ERROR, std::string("unknown whizbang setting ") + key);
    bool isnull = false;
    Datum d = spi_value(0, 1, &isnull);
    if (isnull) throw SqlError(ERRCODE_INTERNAL_ERROR, std::string("whizbang setting ") + key + " has no value");
    text* t = pg_call([&] { return DatumGetTextPP(d); });
    return std::string(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

// Values were validated when written (wh_settings trigger), so parsing cannot fail here.
int setting_int(const char* key) { return std::stoi(setting_text(key)); }

bool setting_bool(const char* key) {
    std::string v = setting_text(key);
    return pg_call([&] { return DatumGetBool(DirectFunctionCall1(boolin, CStringGetDatum(v.c_str()))); });
}

}  // namespace whizbang::pg
