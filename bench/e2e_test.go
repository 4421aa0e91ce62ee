package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func testCommon(b *fakeBroker, topic string) Common {
	return Common{
		NameServers:      b.addr,
		Topic:            topic,
		Duration:         20 * time.Second,
		Interval:         200 * time.Millisecond,
		MaxPrintedErrors: 5,
		ClientLogLevel:   "off",
	}
}

// TestProduceAgainstFakeBroker drives the official client against the
// in-memory fake broker in every send mode, with and without batching, and
// checks that exactly --messages messages arrive and are counted.
func TestProduceAgainstFakeBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b := newFakeBroker(t, 4)
	for _, tc := range []struct {
		mode  string
		batch int
	}{
		{ModeSync, 1}, {ModeSync, 4}, {ModeAsync, 1}, {ModeAsync, 3}, {ModeOneway, 1}, {ModeOneway, 5},
	} {
		t.Run(fmt.Sprintf("%s-batch%d", tc.mode, tc.batch), func(t *testing.T) {
			topic := fmt.Sprintf("T_%s_%d", tc.mode, tc.batch)
			const n = 2000
			cfg := ProduceConfig{
				Common: testCommon(b, topic), Mode: tc.mode, Size: 100, Concurrency: 16,
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
			deadline := time.Now().Add(5 * time.Second)
			for b.countTopic(topic) < n && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if got := b.countTopic(topic); got != n {
				t.Errorf("broker stored %d messages, want %d", got, n)
			}
			if !b.hasTag(topic, "TagA") {
				t.Error("tag not sent")
			}
			var js map[string]any
			if err := json.Unmarshal(out.Bytes(), &js); err != nil || js["kind"] != "produce" {
				t.Errorf("stdout is not the JSON summary: %q (%v)", out.String(), err)
			}
			if !strings.Contains(errw.String(), "SUMMARY produce "+tc.mode) {
				t.Errorf("stderr lacks the human summary:\n%s", errw.String())
			}
		})
	}
}

// TestConsumeAgainstFakeBroker produces a known number of messages and
// consumes them with the push and the pull consumer from the first offset.
func TestConsumeAgainstFakeBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b := newFakeBroker(t, 4)
	const topic, n = "T_consume", 3000
	var out, errw bytes.Buffer
	pc := ProduceConfig{Common: testCommon(b, topic), Mode: ModeAsync, Size: 64, Concurrency: 32, Batch: 8,
		Messages: n, Producers: 1, Retries: -1}
	pc.Quiet = true
	if _, err := RunProduce(context.Background(), pc, &out, &errw); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{ConsumerPush, ConsumerPull} {
		t.Run(typ, func(t *testing.T) {
			var out, errw bytes.Buffer
			cc := ConsumeConfig{Common: testCommon(b, topic), Group: "g_" + typ, Type: typ, Expect: n,
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

// TestProduceStopsOnDurationAndCountsErrors points the producer at a name
// server that does not answer: the run must end on time with errors
// counted, not crash or hang.
func TestProduceStopsOnDurationAndCountsErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b := newFakeBroker(t, 1)
	b.close() // nothing listens on b.addr any more
	cfg := ProduceConfig{Common: testCommon(b, "T_dead"), Mode: ModeSync, Size: 10, Concurrency: 4,
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

func TestCreateTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	b := newFakeBroker(t, 1)
	cfg := ProduceConfig{Common: testCommon(b, "T_created"), Mode: ModeSync, Size: 10, Concurrency: 1,
		Batch: 1, Messages: 10, Producers: 1, Retries: -1, CreateTopic: true,
		TopicOptions: CreateTopicOptions{Brokers: b.addr, Queues: 6}}
	cfg.Quiet = true
	var out, errw bytes.Buffer
	if _, err := RunProduce(context.Background(), cfg, &out, &errw); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.created) != 1 || b.created[0] != "T_created/6/6" {
		t.Errorf("create requests %v", b.created)
	}
}
