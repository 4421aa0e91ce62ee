package integration

// Helpers around the official Go client: producers, push consumers that record what they
// receive, a pull-everything reader, and set comparisons.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// newProducer starts a producer on the cluster's name server (own group and instance name)
// and shuts it down in t.Cleanup.
func newProducer(t testing.TB, c *cluster, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	all := append([]producer.Option{
		producer.WithNameServer(c.clientNameServers()),
		producer.WithGroupName(uniq("PG")),
		producer.WithInstanceName(uniq("prod")),
		producer.WithRetry(2),
	}, opts...)
	p, err := rocketmq.NewProducer(all...)
	if err != nil {
		t.Fatalf("new producer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("start producer: %v", err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

// sent is one acknowledged send.
type sent struct {
	body        string
	queue       int
	offset      int64
	msgID       string // UNIQ_KEY
	offsetMsgID string // store host + commitlog offset
}

// sendSync sends n messages one by one with SendSync and fails the test unless every one is
// SEND_OK. decorate may add tags, keys or a sharding key to message i.
func sendSync(t testing.TB, p rocketmq.Producer, topic, label string, n int, decorate func(i int, m *primitive.Message)) []sent {
	t.Helper()
	out := make([]sent, 0, n)
	for i := range n {
		body := fmt.Sprintf("%s-%d", label, i)
		m := primitive.NewMessage(topic, []byte(body))
		if decorate != nil {
			decorate(i, m)
		}
		r, err := p.SendSync(context.Background(), m)
		if err != nil {
			t.Fatalf("SendSync %s: %v", body, err)
		}
		if r.Status != primitive.SendOK {
			t.Fatalf("SendSync %s: status %d, want SEND_OK (%s)", body, r.Status, r)
		}
		out = append(out, sent{body, r.MessageQueue.QueueId, r.QueueOffset, r.MsgID, r.OffsetMsgID})
	}
	return out
}

func bodies(s []sent) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.body
	}
	return out
}

// waitTopicRoute waits until the name server serves a route for topic naming the broker
// (auto-created topics are registered by the broker after their first send).
func waitTopicRoute(t testing.TB, c *cluster, topic string) {
	t.Helper()
	eventually(t, 20*time.Second, "route of "+topic+" at the name server", func() error {
		return routeHasBroker(c.ns.addr, topic, c.b.addr)
	})
}

// received collects what a push consumer's callback was given, in arrival order.
type received struct {
	mu   sync.Mutex
	msgs []*primitive.MessageExt
}

func (r *received) add(msgs ...*primitive.MessageExt) {
	r.mu.Lock()
	r.msgs = append(r.msgs, msgs...)
	r.mu.Unlock()
}

func (r *received) snapshot() []*primitive.MessageExt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

func (r *received) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// pushConsumer is a started push consumer and what it received.
type pushConsumer struct {
	rocketmq.PushConsumer
	got  *received
	once sync.Once
}

// shutdown stops the consumer (idempotent; also done in t.Cleanup).
func (c *pushConsumer) shutdown() { c.once.Do(func() { _ = c.PushConsumer.Shutdown() }) }

// consumeFunc is a push consumer callback.
type consumeFunc func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)

// startPushConsumer subscribes group to topic with the selector and starts consuming from
// the first offset (for a group without committed offsets). Every message is recorded in
// the result's got and acknowledged with ConsumeSuccess. The topic route must exist; the
// helper waits for it first. Broadcasting consumers' local offset files are removed in
// t.Cleanup.
func startPushConsumer(t testing.TB, c *cluster, group, topic string, sel consumer.MessageSelector, opts ...consumer.Option) *pushConsumer {
	t.Helper()
	return startPushConsumerWith(t, c, group, topic, sel, nil, opts...)
}

// startPushConsumerWith is startPushConsumer with a callback run after recording (nil means
// ConsumeSuccess).
func startPushConsumerWith(t testing.TB, c *cluster, group, topic string, sel consumer.MessageSelector, cb consumeFunc, opts ...consumer.Option) *pushConsumer {
	t.Helper()
	waitTopicRoute(t, c, topic)
	all := append([]consumer.Option{
		consumer.WithNameServer(c.clientNameServers()),
		consumer.WithGroupName(group),
		consumer.WithInstance(uniq("cons")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, opts...)
	pc, err := rocketmq.NewPushConsumer(all...)
	if err != nil {
		t.Fatalf("new push consumer: %v", err)
	}
	pcw := &pushConsumer{PushConsumer: pc, got: &received{}}
	err = pc.Subscribe(topic, sel, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		pcw.got.add(msgs...)
		if cb != nil {
			return cb(ctx, msgs...)
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatalf("subscribe %s: %v", topic, err)
	}
	if err := pc.Start(); err != nil {
		t.Fatalf("start push consumer (group %s, topic %s): %v", group, topic, err)
	}
	t.Cleanup(func() {
		pcw.shutdown()
		removeLocalOffsets(group)
	})
	return pcw
}

// removeLocalOffsets deletes the Go client's broadcasting offset files for group, which it
// writes under $HOME/.rocketmq_client_go (path fixed at client init).
func removeLocalOffsets(group string) {
	base := os.Getenv("rocketmq.client.localOffsetStoreDir")
	if base == "" {
		base = filepath.Join(os.Getenv("HOME"), ".rocketmq_client_go")
	}
	_ = os.RemoveAll(filepath.Join(base, group))
	if m, _ := filepath.Glob(filepath.Join(base, "*", group)); m != nil {
		for _, d := range m {
			_ = os.RemoveAll(d)
		}
	}
}

// setDiff compares received message bodies with the wanted bodies.
type setDiff struct {
	missing, extra, dups []string
}

func diffBodies(want []string, got []*primitive.MessageExt) setDiff {
	return diffStrings(want, msgBodies(got))
}

func diffRecords(want []string, got []*record) setDiff { return diffStrings(want, recBodies(got)) }

func msgBodies(msgs []*primitive.MessageExt) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Body)
	}
	return out
}

func recBodies(recs []*record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Body)
	}
	return out
}

func diffStrings(want, got []string) setDiff {
	w := map[string]bool{}
	for _, b := range want {
		w[b] = true
	}
	seen := map[string]int{}
	var d setDiff
	for _, b := range got {
		seen[b]++
		switch {
		case !w[b]:
			d.extra = append(d.extra, b)
		case seen[b] == 2:
			d.dups = append(d.dups, b)
		}
	}
	for _, b := range want {
		if seen[b] == 0 {
			d.missing = append(d.missing, b)
		}
	}
	return d
}

func (d setDiff) String() string {
	return fmt.Sprintf("missing %d %s, unexpected %d %s, duplicated %d %s",
		len(d.missing), firstFew(d.missing), len(d.extra), firstFew(d.extra), len(d.dups), firstFew(d.dups))
}

func firstFew(s []string) string {
	s = slices.Clone(s)
	sort.Strings(s)
	if len(s) > 8 {
		return "[" + strings.Join(s[:8], " ") + " ...]"
	}
	return "[" + strings.Join(s, " ") + "]"
}

// countErr is the error eventually reports while a consumer has not received enough.
func countErr(who string, got, want int) error {
	if got >= want {
		return nil
	}
	return fmt.Errorf("%s received %d of %d messages", who, got, want)
}
