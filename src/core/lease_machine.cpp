#include "lease_machine.h"

namespace whizbang::core::lease {

bool settle(Slot& s, const FateOf& fate) {
    if (!s.owned || !s.owner.prepared) return false;
    switch (fate(s.owner.xid)) {
        case Fate::in_progress:
            return false;
        case Fate::committed:
            commit(s);
            return true;
        case Fate::aborted:
            abort(s);
            return true;
    }
    return false;
}

Slot settled(const Slot& s, const FateOf& fate) {
    Slot copy = s;
    settle(copy, fate);
    return copy;
}

State change(Slot& s, const Owner& me, const State& next) {
    if (!s.owned) {
        s.owned = true;
        s.owner = me;
        s.current = s.committed;
    }
    const State before = s.current;
    s.current = next;
    return before;
}

Take take(Slot& s, const Owner& me, const Lease& fresh, std::int64_t now, Lease* old, State* before) {
    if (busy(s, me)) return Take::held;
    const State& v = visible(s, me);
    if (v.present) {
        if (v.lease.expiry > now) return Take::held;
        *old = v.lease;
        return Take::lapsed;
    }
    *before = change(s, me, State::of(fresh));
    return Take::taken;
}

bool take_over(Slot& s, const Owner& me, std::int64_t old_token, const Lease& fresh, std::int64_t now, State* before) {
    if (busy(s, me)) return false;
    const State& v = visible(s, me);
    if (!v.present || v.lease.expiry > now || v.lease.token != old_token) return false;
    *before = change(s, me, State::of(fresh));
    return true;
}

bool may_void(const Slot& s, const Owner& me, std::int64_t token, bool* carries) {
    const State& v = visible(s, me);
    *carries = v.present && v.lease.token == token;
    // A row of the run whose end another transaction has pending is being completed right now:
    // voiding the run around it would hand the stream on while an older row may still commit.
    return !(busy(s, me) && s.committed.present && s.committed.lease.token == token);
}

Ended end(Slot& s, const Owner& me, const std::int64_t* token, State* was, State* before) {
    if (busy(s, me)) return Ended::mismatch;
    const State& v = visible(s, me);
    if (v.present) {
        if (token && *token != v.lease.token) return Ended::mismatch;
        *was = v;
        *before = change(s, me, State::none());
        return Ended::ended;
    }
    if (token && *token != kNoLease) return Ended::untouched;
    // No lease: the row is marked all the same, so no claim takes it until `me` ends.
    *was = State::none();
    *before = change(s, me, State::none());
    return Ended::ended;
}

namespace {

// The leases `me` may act on by token: its own view, and the committed lease under it.
template <typename F>
void for_token(Slot& s, const Owner& me, std::int64_t token, F f) {
    if (s.owned && s.owner == me && s.current.present && s.current.lease.token == token) f(s.current.lease);
    if (s.committed.present && s.committed.lease.token == token) f(s.committed.lease);
}

}  // namespace

bool renew(Slot& s, const Owner& me, std::int64_t token, std::int64_t expiry) {
    if (busy(s, me)) return false;
    const State& v = visible(s, me);
    if (!v.present || v.lease.token != token) return false;
    for_token(s, me, token, [&](Lease& l) { l.expiry = expiry; });
    return true;
}

bool extend_live(Slot& s, const Owner& me, std::int64_t token, const Uuid& instance, std::int64_t now, std::int64_t expiry) {
    if (busy(s, me)) return false;
    const State& v = visible(s, me);
    if (!v.present || v.lease.token != token || v.lease.expiry <= now || v.lease.instance != instance) return false;
    for_token(s, me, token, [&](Lease& l) { l.expiry = expiry; });
    return true;
}

void set_delivery(Slot& s, std::int64_t token, std::int32_t attempts, std::int64_t expiry) {
    for (State* st : {&s.current, &s.committed}) {
        if (st == &s.current && !s.owned) continue;
        if (st->present && st->lease.token == token) {
            st->lease.attempts = attempts;
            st->lease.expiry = expiry;
        }
    }
}

void retoken(Slot& s, const Owner& me, std::int64_t from, std::int64_t to) {
    if (s.owned && s.owner == me && s.current.present && s.current.lease.token == from) s.current.lease.token = to;
}

bool held(const Slot& s, const Owner& me, std::int64_t now) {
    if (busy(s, me)) return true;
    const State& v = visible(s, me);
    return v.present && v.lease.expiry > now;
}

void commit(Slot& s) {
    if (!s.owned) return;
    s.committed = s.current;
    s.owned = false;
    s.owner = Owner{};
    s.current = State::none();
}

void abort(Slot& s) {
    s.owned = false;
    s.owner = Owner{};
    s.current = State::none();
}

void prepare(Slot& s, std::uint32_t xid) {
    if (s.owned) s.owner = Owner::prepared_as(xid);
}

void restore(Slot& s, const State& saved, bool release) {
    if (!s.owned) return;
    if (release) abort(s);
    else s.current = saved;
}

}  // namespace whizbang::core::lease
