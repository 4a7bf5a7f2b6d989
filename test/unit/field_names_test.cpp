#include "field_names.h"

#include <gtest/gtest.h>

#include <string>

namespace whizbang::core {
namespace {

std::string miss(std::string_view name, const std::vector<std::string_view>& known = inbox_fields()) {
    auto m = near_miss(name, known);
    return m ? std::string(*m) : std::string("-");
}

TEST(FieldNames, Distance) {
    EXPECT_EQ(folded_distance("ScheduledFor", "ScheduledFor", 2), 0u);
    EXPECT_EQ(folded_distance("messageid", "MessageId", 2), 0u);  // letter case does not count
    EXPECT_EQ(folded_distance("ScheduleFor", "ScheduledFor", 2), 1u);
    EXPECT_EQ(folded_distance("MesasgeId", "MessageId", 2), 1u);  // neighbours swapped
    EXPECT_EQ(folded_distance("Envlp", "Envelope", 3), 3u);
    EXPECT_EQ(folded_distance("kitten", "sitting", 5), 3u);
    EXPECT_EQ(folded_distance("", "abc", 5), 3u);
    // Beyond the limit the answer is limit + 1, also for a huge name (rejected by length).
    EXPECT_EQ(folded_distance("Metadata", "MessageId", 2), 3u);
    EXPECT_EQ(folded_distance(std::string(10000000, 'x'), "Scope", 2), 3u);
    // Names longer than the rows kept on the stack.
    EXPECT_EQ(folded_distance(std::string(100, 'a'), std::string(101, 'A'), 2), 1u);
    EXPECT_EQ(folded_distance(std::string(100, 'a') + "xy", std::string(100, 'a') + "yx", 2), 1u);
    EXPECT_EQ(folded_distance(std::string(100, 'a'), std::string(98, 'a') + "bb", 2), 2u);
}

TEST(FieldNames, NearMissesOfTheDesign) {
    EXPECT_EQ(miss("ScheduleFor"), "ScheduledFor");
    EXPECT_EQ(miss("messageId"), "MessageId");
    EXPECT_EQ(miss("Streamid"), "StreamId");
    EXPECT_EQ(miss("MESSAGETYPE"), "MessageType");
    EXPECT_EQ(miss("Message_Id"), "MessageId");
    EXPECT_EQ(miss("Handler"), "-");          // four letters off
    EXPECT_EQ(miss("HandlerNam"), "HandlerName");
    EXPECT_EQ(miss("scope"), "Scope");
    EXPECT_EQ(miss("Scopes"), "Scope");
    // One letter from a short name is a near miss even when it is a word of its own.
    EXPECT_EQ(miss("Score"), "Scope");
    EXPECT_EQ(miss("Stream"), "StreamId");
    EXPECT_EQ(miss("sentAt"), "SentAt");
    EXPECT_EQ(miss("Destinaton", outbox_fields()), "Destination");
    EXPECT_EQ(miss("isevent", outbox_fields()), "IsEvent");
}

TEST(FieldNames, UnrelatedNamesAreNotNearMisses) {
    // Plausible extension fields of an application stay ignored.
    for (const char* name : {"SentBy", "Shape", "TraceId", "CorrelationId", "CausationId", "Type", "Id",
                             "Version", "Headers", "Tenant", "Priority", "EventId", "Partition", "Data", "Meta",
                             "Schedule", "Handler", "Target", "x", ""}) {
        EXPECT_EQ(miss(name), "-") << name;
        EXPECT_EQ(miss(name, outbox_fields()), "-") << name;
    }
    // The other kind's fields are ignored by each kind, not mistaken for its own.
    EXPECT_EQ(miss("Destination", inbox_fields()), "-");
    EXPECT_EQ(miss("HandlerName", outbox_fields()), "-");
    EXPECT_EQ(miss("SentAt", outbox_fields()), "-");
}

// No known field is a near miss of another, of either kind: otherwise a correct element could
// be refused, and a hint could name the wrong field.
TEST(FieldNames, KnownFieldsAreFarApart) {
    std::vector<std::string_view> all = inbox_fields();
    all.insert(all.end(), outbox_fields().begin(), outbox_fields().end());
    for (std::string_view a : all) {
        for (std::string_view b : all) {
            if (a == b) continue;
            const std::size_t limit = near_miss_limit(b);
            EXPECT_GT(folded_distance(a, b, limit), limit) << a << " is a near miss of " << b;
        }
    }
}

TEST(FieldNames, ClosestKnownFieldWins) {
    // "MessageTyp" is one edit from MessageType and more from MessageId.
    EXPECT_EQ(miss("MessageTyp"), "MessageType");
    EXPECT_EQ(miss("MessageIds"), "MessageId");
}

}  // namespace
}  // namespace whizbang::core
