// The privileges each public function needs on whizbang's tables, views and sequences: one table
// (required_privileges.cpp), checked for the caller when the call starts, on one server and on a
// Citus coordinator alike (issue 30, docs/security.md "Grants for an application role").
//
// Why one table: a single server's statements run as the caller, so PostgreSQL checked them one
// by one as they ran; a coordinator's routed parts run on the nodes as the extension's owner, so
// the coordinator had its own list of what to check, which drifted from what the statements
// needed. Checked up front from one list, both refuse the same calls, before anything is written
// and without internal SQL in the error's context. whizbang._required_privileges() shows the table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pg/boundary/bridge.h"

namespace whizbang::pg {

// When a row of the table applies to a call.
enum class WhenNeeded : std::uint8_t {
    always,
    inbox,     // the call acts on inbox work (its p_source, or what it finds: retry_dead_letters)
    outbox,    // the call acts on outbox work
    instance,  // a pre-leasing store: p_instance_id is given
    sent_at,   // p_sent_at is given (dedup: the retention window is read)
};

struct RequiredPrivilege {
    const char* function;  // in schema whizbang
    WhenNeeded when;
    const char* object;    // a table, view or sequence in schema whizbang
    AclMode privileges;    // ACL_SELECT | ACL_INSERT | ... (ACL_USAGE for a sequence)
};

// Every row, in the order they are checked.
const std::vector<RequiredPrivilege>& required_privileges();

// What a call does, as far as the table's conditions ask.
struct CallShape {
    bool inbox = false;
    bool outbox = false;
    bool instance = false;
    bool sent_at = false;
};

// Raises 42501 (permission denied for table …, with the function and the capability that grants
// it in DETAIL and HINT) unless the current user holds every privilege the table lists for
// `function` and `shape`. Call it as the caller, before AsExtensionOwner and before any write.
void require_privileges(const char* function, const CallShape& shape = {});

// "SELECT, INSERT" for ACL_SELECT | ACL_INSERT.
std::string privilege_names(AclMode privileges);

const char* when_needed_name(WhenNeeded when);

}  // namespace whizbang::pg
