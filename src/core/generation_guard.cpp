#include "generation_guard.h"

namespace whizbang::core::generations {

Before before_insert(const Sighting& any_generation) {
    switch (any_generation.found) {
        case Found::none: return Before::insert;
        case Found::live: return Before::duplicate;
        case Found::inserting:
        case Found::inserted: return Before::wait;
    }
    return Before::wait;
}

After after_insert(const Sighting& other_generations, std::uint32_t my_xid) {
    switch (other_generations.found) {
        case Found::none: return After::keep;
        case Found::live:
        case Found::inserted: return After::withdraw;
        case Found::inserting:
            // The older transaction keeps its record; the younger one withdraws and, at its
            // look, waits for the older one. Both deciding from the same pair of ids, they
            // cannot both keep, nor both wait for each other.
            return xid_precedes(my_xid, other_generations.xid) ? After::wait_keeping : After::withdraw;
    }
    return After::withdraw;
}

}  // namespace whizbang::core::generations
