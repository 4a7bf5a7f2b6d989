#include "pg/claim/retry_policies.h"

#include <array>
#include <optional>
#include <utility>
#include <vector>

#include "core/backoff.h"
#include "pg/boundary/args.h"
#include "pg/boundary/owner.h"
#include "pg/boundary/settings.h"
#include "pg/boundary/spi.h"
#include "pg/boundary/table_cache.h"

namespace whizbang::pg {
namespace {

// A row of wh_retry_policies: NULL columns fall back to the settings.
struct PolicyRow {
    Source source = Source::inbox;
    std::string consumer;
    std::array<std::optional<int64_t>, 4> columns;  // max_attempts, base, max, jitter percent
};

std::vector<PolicyRow> rows;  // the whole table: one row per consumer that has its own policy

void forget() { rows.clear(); }

TableCache cache("wh_retry_policies", forget);

CachedPlan all_rows(
    "SELECT p.source::pg_catalog.text, p.consumer::pg_catalog.text, p.max_attempts, p.retry_base_seconds,"
    "       p.retry_max_seconds, p.retry_jitter_percent"
    "  FROM whizbang.wh_retry_policies p",
    {});

void load_rows() {
    if (cache.fresh()) return;
    // A database whose whizbang predates 0.16.0 (not updated yet) has no policies.
    if (whizbang_table_exists("wh_retry_policies")) {
        // Read as the owner: the policies are the operators' (grant_admin 'policies'), and the
        // roles that claim and fail work were never asked to read them.
        AsExtensionOwner owner;
        const uint64 n = all_rows.execute({});
        for (uint64 r = 0; r < n; ++r) {
            bool isnull = false;
            PolicyRow row;
            row.source = text_from_datum(spi_value(r, 1, &isnull)) == "outbox" ? Source::outbox : Source::inbox;
            row.consumer = text_from_datum(spi_value(r, 2, &isnull));
            for (int c = 0; c < 4; ++c) {
                const Datum d = spi_value(r, c + 3, &isnull);
                if (!isnull) row.columns[c] = DatumGetInt32(d);
            }
            rows.push_back(std::move(row));
        }
    }
    cache.mark_loaded();
}

}  // namespace

RetryPolicies::RetryPolicies(Source source) {
    // The settings first: reading them may take in an invalidation that drops the rows.
    fallback_.max_attempts = setting_int("max_attempts");
    fallback_.base_seconds = setting_int("retry_base_seconds");
    fallback_.max_seconds = setting_int("retry_max_seconds");
    fallback_.jitter_percent = core::kDefaultJitterPercent;
    load_rows();
    for (const PolicyRow& row : rows) {
        if (row.source != source) continue;
        RetryPolicy p;
        p.max_attempts = row.columns[0].value_or(fallback_.max_attempts);
        p.base_seconds = row.columns[1].value_or(fallback_.base_seconds);
        p.max_seconds = row.columns[2].value_or(fallback_.max_seconds);
        p.jitter_percent = static_cast<int>(row.columns[3].value_or(fallback_.jitter_percent));
        own_.emplace(row.consumer, p);
    }
}

}  // namespace whizbang::pg
