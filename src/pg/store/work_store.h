// Storing new messages as work (DESIGN §3.2, §3.3), shared by the inbox and the outbox: the
// message row, the work row with its stream number and partition, and the optional pre-lease.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pg/store/message_parse.h"
#include "pg/claim/work.h"

namespace whizbang::pg {

// The lease of pre-leased rows when p_lease_expiry is NULL.
constexpr int64_t kDefaultLeaseUs = 300 * USECS_PER_SEC;

struct StoreOptions {
    Source source = Source::inbox;
    const char* function_name = "store_inbox_messages";
    std::string consumer;  // '' for the outbox
    TimestampTz now = 0;
    int partition_count = 10000;
    std::optional<core::Uuid> instance;  // pre-lease new rows of idle streams to this instance
    TimestampTz lease_expiry = 0;
};

// Stores messages[fresh[k]] as new work. Inbox: the caller has recorded them as new deliveries,
// so every one is written. Outbox: an id already in wh_outbox (or earlier in `fresh`) is not
// written again. Returns, per element of `fresh`, whether it was written. Inside an SPI
// connection.
std::vector<bool> store_new(const StoreOptions& o, const std::vector<Message>& messages,
                            const std::vector<std::size_t>& fresh);

}  // namespace whizbang::pg
