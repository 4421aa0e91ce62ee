package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// TestSendModesDenseOffsets (a): sync, async, oneway and batch sends to one auto-created topic
// all succeed with SEND_OK, and the queue offsets are dense per queue: reading every queue
// back from offset 0 to GET_MAX_OFFSET (raw pulls, see readAll) yields offsets 0..n-1 with no gap, every sent message
// exactly once, each acknowledged (queue, offset) holding the message it was reported for,
// and each batch occupying consecutive offsets of one queue in batch order.
func TestSendModesDenseOffsets(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("SendModes")
	p := newProducer(t, c)
	ctx := context.Background()

	const nSync, nAsync, nOneway, nBatches, batchSize = 40, 40, 40, 5, 8
	acked := map[string]sent{} // body -> where the broker said it went
	var want []string

	for _, s := range sendSync(t, p, topic, "sync", nSync, nil) {
		acked[s.body] = s
		want = append(want, s.body)
	}

	var (
		mu       sync.Mutex
		asyncErr []error
		wg       sync.WaitGroup
	)
	for i := range nAsync {
		body := fmt.Sprintf("async-%d", i)
		want = append(want, body)
		wg.Add(1)
		err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				asyncErr = append(asyncErr, fmt.Errorf("%s: %w", body, err))
			case r.Status != primitive.SendOK:
				asyncErr = append(asyncErr, fmt.Errorf("%s: status %d", body, r.Status))
			default:
				acked[body] = sent{body: body, queue: r.MessageQueue.QueueId, offset: r.QueueOffset}
			}
		}, primitive.NewMessage(topic, []byte(body)))
		if err != nil {
			wg.Done()
			t.Fatalf("SendAsync %s: %v", body, err)
		}
	}
	waitGroup(t, &wg, 30*time.Second, "async send callbacks")
	if len(asyncErr) > 0 {
		t.Fatalf("%d async sends failed, first: %v", len(asyncErr), asyncErr[0])
	}

	for i := range nOneway {
		body := fmt.Sprintf("oneway-%d", i)
		want = append(want, body)
		if err := p.SendOneWay(ctx, primitive.NewMessage(topic, []byte(body))); err != nil {
			t.Fatalf("SendOneWay %s: %v", body, err)
		}
	}

	// Batches go to one queue each (the Go client sends one SEND_BATCH_MESSAGE per call).
	type batchAck struct {
		queue  int
		first  int64
		bodies []string
	}
	var batches []batchAck
	for b := range nBatches {
		var msgs []*primitive.Message
		var bs []string
		for i := range batchSize {
			body := fmt.Sprintf("batch-%d-%d", b, i)
			bs = append(bs, body)
			msgs = append(msgs, primitive.NewMessage(topic, []byte(body)))
		}
		want = append(want, bs...)
		r, err := p.SendSync(ctx, msgs...)
		if err != nil {
			t.Fatalf("batch %d: %v", b, err)
		}
		if r.Status != primitive.SendOK {
			t.Fatalf("batch %d: status %d", b, r.Status)
		}
		batches = append(batches, batchAck{r.MessageQueue.QueueId, r.QueueOffset, bs})
	}

	// Read everything back; oneway sends may land a moment later, so wait for the total.
	total := nSync + nAsync + nOneway + nBatches*batchSize
	var byQueue map[int][]*record
	eventually(t, 20*time.Second, "all messages readable", func() error {
		byQueue = readAll(t, c, topic)
		return countErr("read", len(flatten(byQueue)), total)
	})
	if d := diffRecords(want, flatten(byQueue)); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
		t.Fatalf("stored set differs from sent set: %s", d)
	}

	at := map[[2]int64]string{} // (queue, offset) -> body
	for q, msgs := range byQueue {
		for i, m := range msgs {
			if m.QueueOffset != int64(i) {
				t.Fatalf("queue %d: message #%d has queue offset %d; offsets must be dense from 0", q, i, m.QueueOffset)
			}
			if int(m.QueueID) != q {
				t.Errorf("queue %d: message %q is stored with queue id %d", q, m.Body, m.QueueID)
			}
			at[[2]int64{int64(q), m.QueueOffset}] = string(m.Body)
		}
	}
	for body, s := range acked {
		if got := at[[2]int64{int64(s.queue), s.offset}]; got != body {
			t.Errorf("send of %q acknowledged at queue %d offset %d, which holds %q", body, s.queue, s.offset, got)
		}
	}
	for i, b := range batches {
		for j, body := range b.bodies {
			if got := at[[2]int64{int64(b.queue), b.first + int64(j)}]; got != body {
				t.Errorf("batch %d message %d: expected %q at queue %d offset %d, found %q",
					i, j, body, b.queue, b.first+int64(j), got)
			}
		}
	}
	if len(byQueue) < 2 {
		t.Errorf("round-robin sends used %d queue(s); expected the auto-created topic to have 4", len(byQueue))
	}
}

// TestSendToChosenQueue checks that a send naming a queue (manual selector) is stored in that
// queue, which the orderly and batch paths rely on.
func TestSendToChosenQueue(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("Chosen")
	p := newProducer(t, c, producer.WithQueueSelector(producer.NewManualQueueSelector()))
	for i := range 12 {
		q := i % 4
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("q%d-%d", q, i)))
		m.Queue = &primitive.MessageQueue{Topic: topic, BrokerName: c.b.name, QueueId: q}
		r, err := p.SendSync(context.Background(), m)
		if err != nil {
			t.Fatalf("send to queue %d: %v", q, err)
		}
		if r.MessageQueue.QueueId != q {
			t.Fatalf("asked for queue %d, broker used %d", q, r.MessageQueue.QueueId)
		}
	}
	for q, msgs := range readAll(t, c, topic) {
		for _, m := range msgs {
			if want := fmt.Sprintf("q%d-", q); !strings.HasPrefix(string(m.Body), want) {
				t.Errorf("queue %d holds %q", q, m.Body)
			}
		}
		if !slices.IsSortedFunc(msgs, func(a, b *record) int { return int(a.QueueOffset - b.QueueOffset) }) {
			t.Errorf("queue %d: offsets out of order", q)
		}
	}
}

// waitGroup waits for wg with a bound.
func waitGroup(t testing.TB, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: not finished within %v", what, d)
	}
}
