#include "pg/citus/claim_memory.h"

#include <deque>
#include <map>
#include <utility>

namespace whizbang::pg {
namespace {

constexpr std::size_t kRemembered = 65536;

using Key = std::pair<int, core::Uuid>;
std::map<Key, int> partitions;
std::deque<Key> order;  // oldest first, to forget

}  // namespace

void remember_claimed(Source source, const core::Uuid& id, int partition) {
    Key key{static_cast<int>(source), id};
    auto [it, added] = partitions.insert_or_assign(key, partition);
    (void)it;
    if (!added) return;
    order.push_back(key);
    while (order.size() > kRemembered) {
        partitions.erase(order.front());
        order.pop_front();
    }
}

std::optional<int> claimed_partition(Source source, const core::Uuid& id) {
    auto it = partitions.find(Key{static_cast<int>(source), id});
    if (it == partitions.end()) return std::nullopt;
    return it->second;
}

}  // namespace whizbang::pg
