#include "pg/boundary/required_privileges.h"
#include "pg/boundary/spi.h"

#include <cstring>
#include <string>

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
}

namespace whizbang::pg {
namespace {

constexpr AclMode S = ACL_SELECT, I = ACL_INSERT, U = ACL_UPDATE, D = ACL_DELETE, USAGE = ACL_USAGE;
using W = WhenNeeded;

// What each function's statements need, as the single server's statements run them (each
// condition as the statement that needs it; a privilege needed only sometimes, such as INSERT on
// wh_dead_letters for the failure that dead-letters, is needed on every call: a role then learns
// of a missing grant on its first call, not weeks later, and a coordinator, which cannot know
// beforehand what the nodes will do, checks the same). Functions that are not listed need
// EXECUTE only, or run plain SQL that PostgreSQL (and Citus) checks as the caller (idempotency_*).
//
// The rows name the work tables wh_inbox_work / wh_outbox_work where the work state is needed: a
// database still at a version before 0.14.0 (split_layout(), spi.h) checks them there, one with
// the work state in the message rows checks them on wh_inbox / wh_outbox (folded(), below).
const std::vector<RequiredPrivilege> table = {
    // Deduplication: new ids are inserted, ids on record counted by an upsert (SELECT, UPDATE).
    {"dedup_insert", W::always, "wh_message_deduplication", S | I | U},
    {"dedup_insert", W::sent_at, "settings", S},
    {"dedup_insert_many", W::always, "wh_message_deduplication", S | I | U},
    {"dedup_insert_many", W::sent_at, "settings", S},
    // Stores: the dedup record, the message, its work row, its stream counter (an upsert).
    {"store_inbox_messages", W::always, "wh_message_deduplication", S | I | U},
    {"store_inbox_messages", W::always, "wh_inbox", I},
    {"store_inbox_messages", W::always, "wh_inbox_work", I},
    {"store_inbox_messages", W::always, "wh_inbox_streams", S | I | U},
    {"store_inbox_messages", W::always, "settings", S},
    {"store_inbox_messages", W::instance, "wh_inbox_work", S},
    {"store_inbox_messages", W::instance, "wh_inbox_preleased", I},
    {"store_inbox_messages", W::instance, "wh_lease_token_seq", USAGE},
    {"inbox_receive", W::always, "wh_message_deduplication", S | I | U},
    {"inbox_receive", W::always, "wh_inbox", I},
    {"inbox_receive", W::always, "wh_inbox_work", I},
    {"inbox_receive", W::always, "wh_inbox_streams", S | I | U},
    {"inbox_receive", W::always, "settings", S},
    {"store_outbox_messages", W::always, "wh_outbox", S | I},
    {"store_outbox_messages", W::always, "wh_outbox_work", I},
    {"store_outbox_messages", W::always, "wh_outbox_streams", S | I | U},
    {"store_outbox_messages", W::always, "settings", S},
    {"store_outbox_messages", W::instance, "wh_outbox_work", S},
    {"store_outbox_messages", W::instance, "wh_outbox_preleased", I},
    {"store_outbox_messages", W::instance, "wh_lease_token_seq", USAGE},
    // Claims read the message, lease the work row, hand back and forget pre-leased rows, draw a
    // token, and dead-letter a row out of attempts (its message and work row leave).
    {"claim_work", W::always, "wh_lease_token_seq", USAGE},
    {"claim_work", W::always, "settings", S},
    {"claim_work", W::always, "wh_dead_letters", I},
    {"claim_work", W::inbox, "wh_inbox", S | D},
    {"claim_work", W::inbox, "wh_inbox_work", S | U | D},
    {"claim_work", W::inbox, "wh_inbox_preleased", S | D},
    {"claim_work", W::outbox, "wh_outbox", S | D},
    {"claim_work", W::outbox, "wh_outbox_work", S | U | D},
    {"claim_work", W::outbox, "wh_outbox_preleased", S | D},
    // Outcomes lock the named work rows (SELECT ... FOR UPDATE); completion deletes them with
    // their messages (debug_mode: marks them), failure retries or dead-letters.
    {"complete_work", W::always, "settings", S},
    {"complete_work", W::inbox, "wh_inbox", S | D},
    {"complete_work", W::inbox, "wh_inbox_work", S | U | D},
    {"complete_work", W::outbox, "wh_outbox", S | D},
    {"complete_work", W::outbox, "wh_outbox_work", S | U | D},
    {"fail_work", W::always, "settings", S},
    {"fail_work", W::always, "wh_dead_letters", I},
    {"fail_work", W::inbox, "wh_inbox", S | D},
    {"fail_work", W::inbox, "wh_inbox_work", S | U | D},
    {"fail_work", W::outbox, "wh_outbox", S | D},
    {"fail_work", W::outbox, "wh_outbox_work", S | U | D},
    {"renew_leases", W::inbox, "wh_inbox_work", S | U},
    {"renew_leases", W::outbox, "wh_outbox_work", S | U},
    {"release_work", W::inbox, "wh_inbox_work", S | U},
    {"release_work", W::outbox, "wh_outbox_work", S | U},
    {"cancel_work", W::inbox, "wh_inbox", S | D},
    {"cancel_work", W::inbox, "wh_inbox_work", S | U | D},
    {"cancel_work", W::outbox, "wh_outbox", S | D},
    {"cancel_work", W::outbox, "wh_outbox_work", S | U | D},
    // An operator's requeue / reschedule locks the named rows and moves them (0.16.0).
    {"requeue", W::inbox, "wh_inbox", S | U},
    {"requeue", W::inbox, "wh_inbox_work", S | U},
    {"requeue", W::outbox, "wh_outbox", S | U},
    {"requeue", W::outbox, "wh_outbox_work", S | U},
    {"reschedule", W::inbox, "wh_inbox", S | U},
    {"reschedule", W::inbox, "wh_inbox_work", S | U},
    {"reschedule", W::outbox, "wh_outbox", S | U},
    {"reschedule", W::outbox, "wh_outbox_work", S | U},
    {"complete_outbox_published", W::always, "settings", S},
    {"complete_outbox_published", W::always, "wh_outbox", S | D},
    {"complete_outbox_published", W::always, "wh_outbox_work", S | U | D},
    // Dead letters go back as stored messages of their source (the sources of those named).
    {"retry_dead_letters", W::always, "wh_dead_letters", S | U | D},
    {"retry_dead_letters", W::inbox, "wh_inbox", S | I},
    {"retry_dead_letters", W::inbox, "wh_inbox_work", I},
    {"retry_dead_letters", W::inbox, "wh_inbox_streams", S | I | U},
    {"retry_dead_letters", W::outbox, "wh_outbox", S | I},
    {"retry_dead_letters", W::outbox, "wh_outbox_work", I},
    {"retry_dead_letters", W::outbox, "wh_outbox_streams", S | I | U},
    // Operating and monitoring: reads.
    {"queues", W::always, "wh_inbox", S},
    {"queues", W::always, "wh_inbox_work", S},
    {"queues", W::always, "wh_outbox", S},
    {"queues", W::always, "wh_outbox_work", S},
    {"queues", W::always, "wh_dead_letters", S},
    {"peek", W::inbox, "wh_inbox", S},
    {"peek", W::inbox, "wh_inbox_work", S},
    {"peek", W::outbox, "wh_outbox", S},
    {"peek", W::outbox, "wh_outbox_work", S},
    {"stats", W::always, "wh_inbox", S},
    {"stats", W::always, "wh_inbox_work", S},
    {"stats", W::always, "wh_outbox", S},
    {"stats", W::always, "wh_outbox_work", S},
    {"stats", W::always, "wh_dead_letters", S},
    {"stats", W::always, "wh_message_deduplication", S},
    {"stats", W::always, "wh_idempotency_keys", S},
    {"dedup_generations", W::always, "wh_message_deduplication", S},
    // Maintenance: purges (row locks FOR UPDATE SKIP LOCKED, deletes; idempotency results nulled).
    {"perform_maintenance", W::always, "settings", S},
    {"perform_maintenance", W::always, "wh_inbox", S | D},
    {"perform_maintenance", W::always, "wh_outbox", S | D},
    {"perform_maintenance", W::always, "wh_message_deduplication", S | U | D},
    {"perform_maintenance", W::always, "wh_idempotency_keys", S | U | D},
    {"perform_maintenance", W::always, "wh_dead_letters", S | U | D},
    {"perform_maintenance", W::always, "wh_inbox_work", S | U | D},
    {"perform_maintenance", W::always, "wh_outbox_work", S | U | D},
    {"perform_maintenance", W::always, "wh_inbox_preleased", S | U | D},
    {"perform_maintenance", W::always, "wh_outbox_preleased", S | U | D},
    {"perform_maintenance", W::always, "wh_inbox_streams", S | U | D},
    {"perform_maintenance", W::always, "wh_outbox_streams", S | U | D},
};

// run_maintenance (the procedure) and its part on a node check what perform_maintenance does.
const char* alias_of(const char* function) {
    if (strcmp(function, "run_maintenance") == 0 || strcmp(function, "_maintenance_batch") == 0)
        return "perform_maintenance";
    return function;
}

bool applies(WhenNeeded when, const CallShape& shape) {
    switch (when) {
        case WhenNeeded::always: return true;
        case WhenNeeded::inbox: return shape.inbox;
        case WhenNeeded::outbox: return shape.outbox;
        case WhenNeeded::instance: return shape.instance;
        case WhenNeeded::sent_at: return shape.sent_at;
    }
    return true;
}

// The one-call grant that covers `function` (docs/security.md), for the hint.
const char* granting_call(const char* function, const CallShape& shape) {
    struct Grant {
        const char* function;
        const char* call;
    };
    static const Grant grants[] = {
        {"dedup_insert", "grant_worker('%s', ARRAY['dedup'])"},
        {"dedup_insert_many", "grant_worker('%s', ARRAY['dedup'])"},
        {"store_inbox_messages", "grant_worker('%s', ARRAY['inbox'])"},
        {"inbox_receive", "grant_worker('%s', ARRAY['inbox'])"},
        {"store_outbox_messages", "grant_worker('%s', ARRAY['outbox'])"},
        {"complete_outbox_published", "grant_worker('%s', ARRAY['relay'])"},
        {"cancel_work", "grant_admin('%s', ARRAY['maintenance'])"},
        {"requeue", "grant_admin('%s', ARRAY['maintenance'])"},
        {"reschedule", "grant_admin('%s', ARRAY['maintenance'])"},
        {"retry_dead_letters", "grant_admin('%s', ARRAY['dead_letters'])"},
        {"queues", "grant_admin('%s', ARRAY['monitor'])"},
        {"peek", "grant_admin('%s', ARRAY['monitor'])"},
        {"stats", "grant_admin('%s', ARRAY['monitor'])"},
        {"dedup_generations", "grant_admin('%s', ARRAY['monitor'])"},
        {"perform_maintenance", "grant_admin('%s', ARRAY['maintenance'])"},
    };
    for (const Grant& g : grants)
        if (strcmp(g.function, function) == 0) return g.call;
    // The work functions: the inbox worker's capability, or the relay's for the outbox.
    return shape.outbox && !shape.inbox ? "grant_worker('%s', ARRAY['relay'])" : "grant_worker('%s', ARRAY['inbox'])";
}

// What the current user lacks of `need` (0: nothing), and how to name the object and the user.
struct Lack {
    AclMode missing = 0;
    char relkind = 0;
    const char* role = nullptr;  // palloc'd
};

Lack lack_of(const RequiredPrivilege& need) {
    return pg_call([&] {
        Lack lack;
        Oid relid = get_relname_relid(need.object, get_namespace_oid("whizbang", false));
        if (!OidIsValid(relid)) return lack;  // not installed (an older schema): its statement would not run
        const Oid user = GetUserId();
        for (AclMode bit : {ACL_SELECT, ACL_INSERT, ACL_UPDATE, ACL_DELETE, ACL_USAGE})
            if ((need.privileges & bit) && pg_class_aclcheck(relid, user, bit) != ACLCHECK_OK) lack.missing |= bit;
        if (lack.missing == 0) return lack;
        lack.relkind = get_rel_relkind(relid);
        lack.role = quote_identifier(GetUserNameFromId(user, false));
        return lack;
    });
}

void check_one(const char* function, const char* shown_as, const CallShape& shape, const RequiredPrivilege& need) {
    const Lack lack = lack_of(need);
    if (lack.missing == 0) return;
    const char* kind = lack.relkind == RELKIND_VIEW ? "view" : lack.relkind == RELKIND_SEQUENCE ? "sequence" : "table";
    // The one-call grant, with the role filled in.
    std::string call = std::string("whizbang.") + granting_call(function, shape);
    const std::string role = lack.role;
    call.replace(call.find("%s"), 2, role);
    throw SqlError(ERRCODE_INSUFFICIENT_PRIVILEGE, std::string("permission denied for ") + kind + " " + need.object,
                   std::string("whizbang.") + shown_as + " needs " + privilege_names(lack.missing) + " on whizbang." +
                       need.object + ", which role " + role + " does not hold.",
                   "As the extension's owner: SELECT " + call +
                       "; or grant what whizbang._required_privileges() lists for the function (docs/security.md).");
}

// The rows for one row per message: a work table's rows go to its message table, merged with the
// message table's row of the same function and condition.
std::vector<RequiredPrivilege> folded() {
    std::vector<RequiredPrivilege> out;
    for (RequiredPrivilege row : table) {
        if (strcmp(row.object, "wh_inbox_work") == 0) row.object = "wh_inbox";
        if (strcmp(row.object, "wh_outbox_work") == 0) row.object = "wh_outbox";
        bool merged = false;
        for (RequiredPrivilege& seen : out)
            if (strcmp(seen.function, row.function) == 0 && seen.when == row.when && strcmp(seen.object, row.object) == 0) {
                seen.privileges |= row.privileges;
                merged = true;
                break;
            }
        if (!merged) out.push_back(row);
    }
    return out;
}

}  // namespace

const std::vector<RequiredPrivilege>& required_privileges() {
    static const std::vector<RequiredPrivilege> one_row = folded();
    return split_layout() ? table : one_row;
}

void require_privileges(const char* function, const CallShape& shape) {
    const char* listed = alias_of(function);
    for (const RequiredPrivilege& need : required_privileges())
        if (strcmp(need.function, listed) == 0 && applies(need.when, shape)) check_one(listed, function, shape, need);
}

std::string privilege_names(AclMode privileges) {
    std::string out;
    const std::pair<AclMode, const char*> names[] = {
        {ACL_SELECT, "SELECT"}, {ACL_INSERT, "INSERT"}, {ACL_UPDATE, "UPDATE"}, {ACL_DELETE, "DELETE"}, {ACL_USAGE, "USAGE"}};
    for (const auto& [bit, name] : names) {
        if (!(privileges & bit)) continue;
        if (!out.empty()) out += ", ";
        out += name;
    }
    return out;
}

const char* when_needed_name(WhenNeeded when) {
    switch (when) {
        case WhenNeeded::always: return "always";
        case WhenNeeded::inbox: return "inbox";
        case WhenNeeded::outbox: return "outbox";
        case WhenNeeded::instance: return "p_instance_id";
        case WhenNeeded::sent_at: return "p_sent_at";
    }
    return "always";
}

}  // namespace whizbang::pg
