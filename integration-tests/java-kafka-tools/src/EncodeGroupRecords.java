// Prints Apache Kafka's own encodings (kafka-group-coordinator 4.1) of the
// __consumer_offsets record keys and values, for Weir's differential test of
// its codec (issue 4, point 3). Run with Java's source launcher on the
// kafka_2.13 classpath resolved from ../pom.xml:
//
//   java -cp <classpath> EncodeGroupRecords.java
//
// One line per record: "<schema> <version> <hex bytes>". Keys are prefixed
// with their record type, values with their version, as the coordinator
// writes them (MessageUtil). The field values are fixed; Weir's test builds
// the same records and compares bytes both ways:
//   OffsetCommitKey(group "g1", topic "orders", partition 5) as type 1 and,
//   with the same fields, LegacyOffsetCommitKey as type 0;
//   GroupMetadataKey(group "g1");
//   OffsetCommitValue v0-4 (offset 42, leader epoch 7, metadata "meta",
//   commit timestamp 1700000000000, expire timestamp 1700000900000 where the
//   version has it), and v4 with a topic id (a tagged field);
//   GroupMetadataValue v0-4: protocol type "consumer", generation 3,
//   protocol "range", leader "consumer-1-abc", current state timestamp
//   1700000000500, members "consumer-1-abc" (instance "static-1") and
//   "consumer-2-def" (dynamic), client "consumer-1", host "/127.0.0.1",
//   rebalance timeout 300000, session timeout 45000, subscription 00 01 02,
//   assignment 09 08; and an empty group (protocol type "", generation 0,
//   null protocol and leader, timestamp 5, no members).

import java.util.List;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.group.generated.GroupMetadataKey;
import org.apache.kafka.coordinator.group.generated.GroupMetadataValue;
import org.apache.kafka.coordinator.group.generated.LegacyOffsetCommitKey;
import org.apache.kafka.coordinator.group.generated.OffsetCommitKey;
import org.apache.kafka.coordinator.group.generated.OffsetCommitValue;

public class EncodeGroupRecords {
    static void print(String schema, int version, byte[] bytes) {
        StringBuilder hex = new StringBuilder();
        for (byte b : bytes) {
            hex.append(String.format("%02x", b));
        }
        System.out.println(schema + " " + version + " " + hex);
    }

    static GroupMetadataValue.MemberMetadata member(String id, String instance) {
        return new GroupMetadataValue.MemberMetadata()
            .setMemberId(id)
            .setGroupInstanceId(instance)
            .setClientId("consumer-1")
            .setClientHost("/127.0.0.1")
            .setRebalanceTimeout(300000)
            .setSessionTimeout(45000)
            .setSubscription(new byte[] {0, 1, 2})
            .setAssignment(new byte[] {9, 8});
    }

    public static void main(String[] args) {
        print("OffsetCommitKey", 1, MessageUtil.toCoordinatorTypePrefixedBytes(
            new OffsetCommitKey().setGroup("g1").setTopic("orders").setPartition(5)));
        print("LegacyOffsetCommitKey", 0, MessageUtil.toCoordinatorTypePrefixedBytes(
            new LegacyOffsetCommitKey().setGroup("g1").setTopic("orders").setPartition(5)));
        print("GroupMetadataKey", 2, MessageUtil.toCoordinatorTypePrefixedBytes(
            new GroupMetadataKey().setGroup("g1")));
        for (short v = 0; v <= 4; v++) {
            OffsetCommitValue value = new OffsetCommitValue()
                .setOffset(42)
                .setLeaderEpoch(7)
                .setMetadata("meta")
                .setCommitTimestamp(1700000000000L)
                .setExpireTimestamp(v == 1 ? 1700000900000L : -1L);
            print("OffsetCommitValue", v, MessageUtil.toVersionPrefixedBytes(v, value));
        }
        print("OffsetCommitValueWithTopicId", 4, MessageUtil.toVersionPrefixedBytes((short) 4,
            new OffsetCommitValue()
                .setOffset(42)
                .setLeaderEpoch(7)
                .setMetadata("meta")
                .setCommitTimestamp(1700000000000L)
                .setTopicId(Uuid.fromString("AAAAAAAAAAAAAAAAAAAAAQ"))));
        for (short v = 0; v <= 4; v++) {
            GroupMetadataValue group = new GroupMetadataValue()
                .setProtocolType("consumer")
                .setGeneration(3)
                .setProtocol("range")
                .setLeader("consumer-1-abc")
                .setCurrentStateTimestamp(1700000000500L)
                .setMembers(List.of(
                    member("consumer-1-abc", v >= 3 ? "static-1" : null),
                    member("consumer-2-def", null)));
            print("GroupMetadataValue", v, MessageUtil.toVersionPrefixedBytes(v, group));
            GroupMetadataValue empty = new GroupMetadataValue()
                .setProtocolType("")
                .setGeneration(0)
                .setProtocol(null)
                .setLeader(null)
                .setCurrentStateTimestamp(5)
                .setMembers(List.of());
            print("EmptyGroupMetadataValue", v, MessageUtil.toVersionPrefixedBytes(v, empty));
        }
    }
}
