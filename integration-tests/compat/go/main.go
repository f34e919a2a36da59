// Command franzgo is the go area's smoke check with franz-go: it creates a
// topic of partitions partitions, produces perPartition records to each
// (franz-go's default idempotent acks=all producer, with lz4 batches),
// consumes them all in a new group from the start (asserting the batches
// came back lz4-compressed), commits, and reads the committed offsets back
// with kadm. It asserts exact records and offsets
// and exits 1 with a message on the first mismatch; every wait has a
// deadline.
//
// Usage: franzgo BOOTSTRAP
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	partitions   = 3
	perPartition = 10
	deadline     = 60 * time.Second
)

func fail(format string, args ...any) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func expect(what string, got, want any) {
	if !reflect.DeepEqual(got, want) {
		fail("%s: got %v, want %v", what, got, want)
	}
	fmt.Printf("ok: %s = %v\n", what, got)
}

func must(what string, err error) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

type record struct {
	Partition  int32
	Offset     int64
	Key, Value string
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: franzgo BOOTSTRAP")
	}
	bootstrap := os.Args[1]
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	topic := "compat-franz-go-" + hex.EncodeToString(suffix)
	group := "compat-franz-go-group-" + hex.EncodeToString(suffix)
	fmt.Printf("franz-go: topic %s, group %s\n", topic, group)
	ctx, cancel := context.WithTimeout(context.Background(), 3*deadline)
	defer cancel()

	adminClient, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	must("admin client", err)
	defer adminClient.Close()
	adm := kadm.NewClient(adminClient)
	created, err := adm.CreateTopics(ctx, partitions, 1, nil, topic)
	must("CreateTopics", err)
	must("CreateTopics "+topic, created[topic].Err)

	producer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	must("producer client", err)
	var recs []*kgo.Record
	var want []record
	for p := int32(0); p < partitions; p++ {
		for i := int64(0); i < perPartition; i++ {
			// A value that lz4 shrinks even alone, so that every batch is
			// sent compressed.
			key, value := fmt.Sprintf("k%d-%d", p, i), fmt.Sprintf("v%d-%d-", p, i)+strings.Repeat("x", 200)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(value)})
			want = append(want, record{p, i, key, value})
		}
	}
	results := producer.ProduceSync(ctx, recs...)
	must("ProduceSync", results.FirstErr())
	var produced []record
	for _, r := range results {
		produced = append(produced, record{r.Record.Partition, r.Record.Offset, string(r.Record.Key), string(r.Record.Value)})
	}
	sortRecords(produced)
	expect("produced (partition, offset, key, value)", produced, want)
	producer.Close()

	ends, err := adm.ListEndOffsets(ctx, topic)
	must("ListEndOffsets", err)
	endOffsets := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { must("ListEndOffsets partition", o.Err); endOffsets[o.Partition] = o.Offset })
	expect("end offsets", endOffsets, wantOffsets())

	consumer, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit())
	must("consumer client", err)
	var consumed []record
	codecs := map[uint8]int{}
	pollCtx, pollCancel := context.WithTimeout(ctx, deadline)
	for len(consumed) < partitions*perPartition {
		fetches := consumer.PollFetches(pollCtx)
		if pollCtx.Err() != nil {
			fail("consumed %d of %d records within %v", len(consumed), partitions*perPartition, deadline)
		}
		fetches.EachError(func(t string, p int32, err error) { fail("fetch %s/%d: %v", t, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			consumed = append(consumed, record{r.Partition, r.Offset, string(r.Key), string(r.Value)})
			codecs[r.Attrs.CompressionType()]++
		})
	}
	pollCancel()
	sortRecords(consumed)
	expect("consumed (partition, offset, key, value)", consumed, want)
	expect("consumed records by batch codec id (3 = lz4)", codecs, map[uint8]int{3: partitions * perPartition})
	must("CommitUncommittedOffsets", consumer.CommitUncommittedOffsets(ctx))

	fetched, err := adm.FetchOffsets(ctx, group)
	must("FetchOffsets", err)
	committed := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		must("FetchOffsets partition", o.Err)
		if o.Topic == topic {
			committed[o.Partition] = o.At
		}
	})
	expect("committed offsets (kadm FetchOffsets)", committed, wantOffsets())

	described, err := adm.DescribeGroups(ctx, group)
	must("DescribeGroups", err)
	g := described[group]
	must("DescribeGroups "+group, g.Err)
	expect("group (state, protocol type, members)", []any{g.State, g.ProtocolType, len(g.Members)},
		[]any{"Stable", "consumer", 1})
	consumer.Close()
	fmt.Println("franz-go: all checks passed")
}

func wantOffsets() map[int32]int64 {
	m := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		m[p] = perPartition
	}
	return m
}

func sortRecords(rs []record) {
	sort.Slice(rs, func(i, j int) bool {
		if rs[i].Partition != rs[j].Partition {
			return rs[i].Partition < rs[j].Partition
		}
		return rs[i].Offset < rs[j].Offset
	})
}
