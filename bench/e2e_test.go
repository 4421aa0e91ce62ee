package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"rocketraft/message"
)

func testCommon(nsAddr, topic string) Common {
	return Common{
		NameServers:      nsAddr,
		Topic:            topic,
		Duration:         20 * time.Second,
		Interval:         200 * time.Millisecond,
		MaxPrintedErrors: 5,
		ClientLogLevel:   "off",
	}
}

var topicCounter atomic.Int64

// uniqTopic returns a topic name not used before in this process: the
// in-process broker outlives a test when it runs with -count > 1.
func uniqTopic(base string) string {
	return fmt.Sprintf("%s_%d", base, topicCounter.Add(1))
}

// syncBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProduceOfficial drives the official client against the in-process
// broker in every send mode, with and without batching, and checks that
// exactly --messages messages are counted and stored.
func TestProduceOfficial(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b := realBroker(t)
	for _, tc := range []struct {
		mode  string
		batch int
	}{
		{ModeSync, 1}, {ModeSync, 4}, {ModeAsync, 1}, {ModeAsync, 3}, {ModeOneway, 1}, {ModeOneway, 5},
	} {
		t.Run(fmt.Sprintf("%s-batch%d", tc.mode, tc.batch), func(t *testing.T) {
			topic := uniqTopic(fmt.Sprintf("T_official_%s_%d", tc.mode, tc.batch))
			const n = 2000
			cfg := ProduceConfig{
				Common: testCommon(b.nsAddr, topic), Mode: tc.mode, Size: 100, Concurrency: 16,
				Batch: tc.batch, Messages: n, Producers: 2, Tag: "TagA", Retries: -1,
				CompressOver: 4096,
			}
			cfg.JSON = true
			var out, errw bytes.Buffer
			sum, err := RunProduce(context.Background(), cfg, &out, &errw)
			if err != nil {
				t.Fatalf("RunProduce: %v\n%s", err, errw.String())
			}
			if sum.TotalMsgs != n || sum.TotalErrors != 0 {
				t.Errorf("total msgs %d errors %d, want %d/0\n%s", sum.TotalMsgs, sum.TotalErrors, n, errw.String())
			}
			// one priming send per producer, then batches
			wantOps := uint64(cfg.Producers + (n-cfg.Producers+tc.batch-1)/tc.batch)
			if sum.Ops != wantOps {
				t.Errorf("ops %d, want %d", sum.Ops, wantOps)
			}
			// oneway sends may still be in the socket when Run returns
			if got := b.waitStored(t, topic, n); got != n {
				t.Errorf("broker stored %d messages, want %d", got, n)
			}
			if tags := b.firstRecord(t, topic).Tags(); string(tags) != "TagA" {
				t.Errorf("stored tag %q, want TagA", tags)
			}
			var js map[string]any
			if err := json.Unmarshal(out.Bytes(), &js); err != nil || js["kind"] != "produce" {
				t.Errorf("stdout is not the JSON summary: %q (%v)", out.String(), err)
			}
			if _, ok := js["client"]; ok {
				t.Errorf("official summary names a client: %q", out.String())
			}
			if !strings.Contains(errw.String(), "SUMMARY produce "+tc.mode) {
				t.Errorf("stderr lacks the human summary:\n%s", errw.String())
			}
		})
	}
}

// TestConsumeOfficial produces a known number of messages and consumes them
// with the official push and pull consumers from the first offset.
func TestConsumeOfficial(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b := realBroker(t)
	const n = 3000
	topic := uniqTopic("T_official_consume")
	var out, errw bytes.Buffer
	pc := ProduceConfig{Common: testCommon(b.nsAddr, topic), Mode: ModeAsync, Size: 64, Concurrency: 32, Batch: 8,
		Messages: n, Producers: 1, Retries: -1}
	pc.Quiet = true
	if _, err := RunProduce(context.Background(), pc, &out, &errw); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{ConsumerPush, ConsumerPull} {
		t.Run(typ, func(t *testing.T) {
			var out, errw bytes.Buffer
			cc := ConsumeConfig{Common: testCommon(b.nsAddr, topic), Group: "g_" + typ, Type: typ, Expect: n,
				From: "first", Tag: "*", PullBatch: 64, ConsumeBatch: 32, Pollers: 2, WaitTopic: 5 * time.Second}
			cc.Duration = 30 * time.Second
			sum, err := RunConsume(context.Background(), cc, &out, &errw)
			if err != nil {
				t.Fatalf("RunConsume: %v\n%s", err, errw.String())
			}
			if sum.TotalMsgs < n {
				t.Errorf("received %d, want >= %d\n%s%s", sum.TotalMsgs, n, out.String(), errw.String())
			}
			if sum.ElapsedSec > 25 {
				t.Errorf("did not stop on --expect: elapsed %.1fs", sum.ElapsedSec)
			}
			if sum.Bytes != 64*sum.Msgs {
				t.Errorf("bytes %d for %d msgs of 64B", sum.Bytes, sum.Msgs)
			}
			if sum.MaxMs <= 0 || sum.P50Ms > sum.MaxMs {
				t.Errorf("implausible e2e latency p50 %.2f max %.2f", sum.P50Ms, sum.MaxMs)
			}
			if !strings.Contains(out.String(), "SUMMARY consume "+typ) || !strings.Contains(out.String(), "e2e.p99") {
				t.Errorf("output:\n%s", out.String())
			}
		})
	}
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestProduceStopsOnDurationAndCountsErrors points the producer at a name
// server that does not answer: the run must end on time with errors
// counted, not crash or hang.
func TestProduceStopsOnDurationAndCountsErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	cfg := ProduceConfig{Common: testCommon(deadAddr(t), "T_dead"), Mode: ModeSync, Size: 10, Concurrency: 4,
		Batch: 1, Producers: 1, Retries: 0, SendTimeout: 200 * time.Millisecond}
	cfg.Duration = 1500 * time.Millisecond
	var out, errw bytes.Buffer
	start := time.Now()
	sum, err := RunProduce(context.Background(), cfg, &out, &errw)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 8*time.Second {
		t.Errorf("took %s", el)
	}
	if sum.TotalErrors == 0 || sum.TotalMsgs != 0 {
		t.Errorf("errors %d msgs %d", sum.TotalErrors, sum.TotalMsgs)
	}
	if !strings.Contains(errw.String(), "error #1") || len(sum.TopErrors) == 0 {
		t.Errorf("errors not reported:\n%s", errw.String())
	}
}

// TestNativeNoRoute: with no name server answering, a native run gives up
// once its duration has passed instead of waiting for a route forever.
func TestNativeNoRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	cfg := ProduceConfig{Common: testCommon(deadAddr(t), "T_dead"), Mode: ModeSync, Size: 10, Concurrency: 4,
		Batch: 1, Producers: 1}
	cfg.Client = ClientNative
	cfg.Duration = time.Second
	var out, errw bytes.Buffer
	start := time.Now()
	_, err := RunProduce(context.Background(), cfg, &out, &errw)
	if err == nil || !strings.Contains(err.Error(), "route") {
		t.Errorf("err %v, want a route error", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %s", el)
	}
}

func TestCreateTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b := realBroker(t)
	topic := uniqTopic("T_created")
	cfg := ProduceConfig{Common: testCommon(b.nsAddr, topic), Mode: ModeSync, Size: 10, Concurrency: 1,
		Batch: 1, Messages: 10, Producers: 1, Retries: -1, CreateTopic: true,
		TopicOptions: CreateTopicOptions{Brokers: b.br.Addr(), Queues: 6}}
	cfg.Quiet = true
	var out, errw bytes.Buffer
	if _, err := RunProduce(context.Background(), cfg, &out, &errw); err != nil {
		t.Fatal(err)
	}
	rd := b.route(t, topic)
	if len(rd.QueueDatas) != 1 || rd.QueueDatas[0].ReadQueueNums != 6 || rd.QueueDatas[0].WriteQueueNums != 6 {
		t.Errorf("route %+v, want one broker with 6/6 queues", rd.QueueDatas)
	}
	if got := b.waitStored(t, topic, 10); got != 10 {
		t.Errorf("stored %d, want 10", got)
	}
}

// TestProduceNative sends with the native client in every mode, with and
// without batching, to new topics (auto-created from TBW102) and to an
// existing one, and checks exact counts, ops and the stored properties.
func TestProduceNative(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b := realBroker(t)
	for _, tc := range []struct {
		mode      string
		batch     int
		serialize string  // request headers (ProduceConfig.Serialize)
		rate      float64 // msg/s (ProduceConfig.Rate), 0: unpaced
	}{
		{ModeSync, 1, "", 0}, {ModeSync, 4, "", 0}, {ModeAsync, 1, "", 0}, {ModeAsync, 16, "", 0}, {ModeOneway, 1, "", 0}, {ModeOneway, 5, "", 0},
		{ModeSync, 1, SerializeRocketMQ, 0}, {ModeAsync, 1, SerializeRocketMQ, 0}, {ModeAsync, 16, SerializeRocketMQ, 0},
		{ModeAsync, 1, "", 6000},
	} {
		name := fmt.Sprintf("%s-batch%d", tc.mode, tc.batch)
		if tc.serialize != "" {
			name += "-" + tc.serialize
		}
		if tc.rate > 0 {
			name += fmt.Sprintf("-rate%.0f", tc.rate)
		}
		t.Run(name, func(t *testing.T) {
			topic := uniqTopic("T_native_" + strings.ReplaceAll(name, "-", "_"))
			const n = 3000
			rounds := 2 // first auto-created, then existing
			if tc.mode == ModeOneway {
				rounds = 1 // each oneway run lingers 1 s
			}
			for round := range rounds {
				cfg := ProduceConfig{
					Common: testCommon(b.nsAddr, topic), Mode: tc.mode, Size: 100, Concurrency: 32,
					Batch: tc.batch, Messages: n, Tag: "TagN", Serialize: tc.serialize, Rate: tc.rate,
				}
				cfg.Client = ClientNative
				cfg.Connections = 3
				cfg.JSON = true
				if tc.mode == ModeSync && tc.batch == 1 {
					cfg.SlowLog = time.Nanosecond // every send is "slow": one line each
				}
				var out, errw bytes.Buffer
				start := time.Now()
				sum, err := RunProduce(context.Background(), cfg, &out, &errw)
				if err != nil {
					t.Fatalf("RunProduce: %v\n%s", err, errw.String())
				}
				// Paced, the run cannot be faster than its rate allows (a slow machine only
				// makes it longer); the bound leaves Concurrency slots of slack.
				if least := time.Duration(float64(n-cfg.Concurrency) / tc.rate * float64(time.Second)); tc.rate > 0 && time.Since(start) < least {
					t.Errorf("%d messages at %.0f msg/s took %s, less than %s", n, tc.rate, time.Since(start), least)
				}
				if sum.TotalMsgs != n || sum.TotalErrors != 0 {
					t.Fatalf("round %d: total msgs %d errors %d, want %d/0\n%s", round, sum.TotalMsgs, sum.TotalErrors, n, errw.String())
				}
				if wantOps := uint64((n + tc.batch - 1) / tc.batch); sum.Ops != wantOps {
					t.Errorf("ops %d, want %d", sum.Ops, wantOps)
				}
				if slow := strings.Count(errw.String(), "\nslow: "); cfg.SlowLog > 0 && uint64(slow) != sum.Ops || cfg.SlowLog == 0 && slow != 0 {
					t.Errorf("%d slow-send lines for %d sends with --slow-log %v", slow, sum.Ops, cfg.SlowLog)
				}
				if sum.Bytes != 100*n || sum.Client != ClientNative {
					t.Errorf("bytes %d client %q", sum.Bytes, sum.Client)
				}
				want := int64((round + 1) * n)
				if got := b.waitStored(t, topic, want); got != want {
					t.Errorf("round %d: broker stored %d messages, want %d", round, got, want)
				}
				var js map[string]any
				if err := json.Unmarshal(out.Bytes(), &js); err != nil || js["kind"] != "produce" || js["client"] != ClientNative {
					t.Errorf("stdout is not the JSON summary: %q (%v)", out.String(), err)
				}
				if !strings.Contains(errw.String(), "SUMMARY produce "+tc.mode) || !strings.Contains(errw.String(), "client=native") {
					t.Errorf("stderr lacks the header or the human summary:\n%s", errw.String())
				}
				if round == 0 && !strings.Contains(errw.String(), "route=TBW102") {
					t.Errorf("first round did not go through TBW102:\n%s", errw.String())
				}
			}
			rd := b.route(t, topic)
			if len(rd.QueueDatas) != 1 || rd.QueueDatas[0].WriteQueueNums != defaultTopicQueueNums {
				t.Errorf("auto-created route %+v, want %d queues", rd.QueueDatas, defaultTopicQueueNums)
			}
			v := b.firstRecord(t, topic)
			if string(v.Tags()) != "TagN" {
				t.Errorf("stored tag %q", v.Tags())
			}
			if w, _ := v.Property(message.PropertyWaitStoreMsgOK); string(w) != "true" {
				t.Errorf("WAIT %q", w)
			}
			if id, _ := v.Property(message.PropertyUniqClientMessageID); len(id) != 32 {
				t.Errorf("UNIQ_KEY %q", id)
			}
			if len(v.Body()) != 100 {
				t.Errorf("body %d bytes", len(v.Body()))
			}
		})
	}
}

// TestUniqIDs checks that native message ids differ across goroutines and
// sequence numbers.
func TestUniqIDs(t *testing.T) {
	u := newUniqIDs()
	seen := map[string]bool{}
	for g := range uint64(4) {
		for i := range uint64(1000) {
			id := string(u.appendID(nil, g<<40|i))
			if len(id) != 32 || seen[id] {
				t.Fatalf("id %q (duplicate %v)", id, seen[id])
			}
			seen[id] = true
		}
	}
}

// TestConsumeNative produces a known number of messages natively, consumes
// them with the native client from the first offset (all, with a matching
// tag, none with another tag), and from the last offset while more arrive.
func TestConsumeNative(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b := realBroker(t)
	const n = 5000
	topic := uniqTopic("T_native_consume")
	produce := func(count int64) {
		t.Helper()
		var out, errw bytes.Buffer
		pc := ProduceConfig{Common: testCommon(b.nsAddr, topic), Mode: ModeAsync, Size: 64, Concurrency: 32, Batch: 8,
			Messages: count, Tag: "TagC"}
		pc.Client = ClientNative
		pc.Quiet = true
		sum, err := RunProduce(context.Background(), pc, &out, &errw)
		if err != nil || sum.TotalMsgs != uint64(count) {
			t.Fatalf("produce: %v %+v\n%s", err, sum, errw.String())
		}
	}
	produce(n)
	consume := func(tag, from string, expect int64, d time.Duration, stderr *syncBuffer) (*Summary, string) {
		t.Helper()
		var out bytes.Buffer
		cc := ConsumeConfig{Common: testCommon(b.nsAddr, topic), Group: "g_native", Type: ConsumerPull, Expect: expect,
			From: from, Tag: tag, PullBatch: 32, ConsumeBatch: 32, WaitTopic: 5 * time.Second}
		cc.Client = ClientNative
		cc.Duration = d
		sum, err := RunConsume(context.Background(), cc, &out, stderr)
		if err != nil {
			t.Fatalf("RunConsume: %v\n%s", err, stderr.String())
		}
		return sum, out.String()
	}

	t.Run("first", func(t *testing.T) {
		var errw syncBuffer
		sum, out := consume("*", "first", n, 20*time.Second, &errw)
		if sum.TotalMsgs != n || sum.TotalErrors != 0 {
			t.Errorf("received %d errors %d, want %d/0\n%s%s", sum.TotalMsgs, sum.TotalErrors, n, out, errw.String())
		}
		if sum.ElapsedSec > 15 {
			t.Errorf("did not stop on --expect: elapsed %.1fs", sum.ElapsedSec)
		}
		if sum.Bytes != 64*sum.Msgs || sum.Ops < n/32 {
			t.Errorf("bytes %d ops %d for %d msgs", sum.Bytes, sum.Ops, sum.Msgs)
		}
		if sum.MaxMs <= 0 || sum.P50Ms > sum.MaxMs {
			t.Errorf("implausible e2e latency p50 %.2f max %.2f", sum.P50Ms, sum.MaxMs)
		}
		if !strings.Contains(out, "SUMMARY consume pull") || !strings.Contains(out, "e2e.p99") {
			t.Errorf("output:\n%s", out)
		}
	})
	t.Run("tags", func(t *testing.T) {
		var errw syncBuffer
		if sum, _ := consume("TagC || TagX", "first", n, 20*time.Second, &errw); sum.TotalMsgs != n {
			t.Errorf("matching tag: received %d, want %d\n%s", sum.TotalMsgs, n, errw.String())
		}
		if sum, _ := consume("TagX", "first", 0, 1500*time.Millisecond, &errw); sum.TotalMsgs != 0 || sum.TotalErrors != 0 {
			t.Errorf("other tag: received %d errors %d, want 0/0\n%s", sum.TotalMsgs, sum.TotalErrors, errw.String())
		}
	})
	t.Run("last", func(t *testing.T) {
		const more = 1000
		var errw syncBuffer
		done := make(chan *Summary, 1)
		go func() {
			sum, _ := consume("*", "last", more, 20*time.Second, &errw)
			done <- sum
		}()
		// Produce once the consumer has taken its start offsets.
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(errw.String(), "mqbench consume: client=native") {
			if time.Now().After(deadline) {
				t.Fatalf("consumer did not start:\n%s", errw.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		produce(more)
		sum := <-done
		if sum.TotalMsgs != more || sum.TotalErrors != 0 {
			t.Errorf("received %d errors %d, want %d/0\n%s", sum.TotalMsgs, sum.TotalErrors, more, errw.String())
		}
		if sum.ElapsedSec > 15 {
			t.Errorf("did not stop on --expect: elapsed %.1fs", sum.ElapsedSec)
		}
	})
}
