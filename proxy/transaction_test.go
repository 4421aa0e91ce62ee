package proxy

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"rocketraft/message"
	"rocketraft/proxy/rmqpb"
)

// TestTxnIDRoundTrip: a transaction id names the half message's group and offsets, a broker
// name holding ':' included, and anything else is refused with the reason.
func TestTxnIDRoundTrip(t *testing.T) {
	want := txnID{broker: "broker:a", queueOffset: 7, physical: 123456}
	got, err := parseTxnID(want.String())
	if err != nil || got != want {
		t.Fatalf("round trip of %s: %+v, %v", want, got, err)
	}
	for _, bad := range []string{"", "x", "t1:1:2", "t2:1:2:b", "t1:-1:2:b", "t1:1:x:b", "t1:1:2:"} {
		if _, err := parseTxnID(bad); err == nil {
			t.Errorf("parseTxnID(%q) accepted", bad)
		}
	}
}

// TestEndTransactionBadInput: malformed requests get in-band statuses before any broker is
// asked (the messaging value has no connections).
func TestEndTransactionBadInput(t *testing.T) {
	m := &messaging{}
	ctx := context.Background()
	topic := &rmqpb.Resource{Name: "T"}
	for _, tc := range []struct {
		req  *rmqpb.EndTransactionRequest
		want rmqpb.Code
	}{
		{nil, rmqpb.Code_ILLEGAL_TOPIC},
		{&rmqpb.EndTransactionRequest{Topic: topic, TransactionId: "nonsense"}, rmqpb.Code_INVALID_TRANSACTION_ID},
		{&rmqpb.EndTransactionRequest{Topic: topic}, rmqpb.Code_INVALID_TRANSACTION_ID},
		{&rmqpb.EndTransactionRequest{Topic: topic, TransactionId: "t1:1:2:b", Resolution: 9}, rmqpb.Code_BAD_REQUEST},
	} {
		r, err := m.EndTransaction(ctx, tc.req)
		if err != nil || r.GetStatus().GetCode() != tc.want {
			t.Errorf("%v: %v, %v; want in-band %v", tc.req, r.GetStatus(), err, tc.want)
		}
	}
}

// TestHalfProperties: a TRANSACTION message becomes a 4.x half message (TRAN_MSG, PGROUP = the
// topic, the prepared sysFlag bit, the immunity time in seconds); others are left alone.
func TestHalfProperties(t *testing.T) {
	msg := &rmqpb.Message{Topic: &rmqpb.Resource{Name: "T"}, SystemProperties: &rmqpb.SystemProperties{
		MessageType: rmqpb.MessageType_TRANSACTION, OrphanedTransactionRecoveryDuration: durationpb.New(30 * time.Second)}}
	props := map[string]string{}
	halfProperties(msg, props)
	if props[message.PropertyTransactionPrepared] != "true" || props[message.PropertyProducerGroup] != "T" || props[message.PropertyCheckImmunityTime] != "30" {
		t.Fatalf("half properties %v", props)
	}
	if halfSysFlag(msg) != message.TransactionPreparedType {
		t.Fatalf("sysFlag %d", halfSysFlag(msg))
	}
	msg.SystemProperties.MessageType = rmqpb.MessageType_NORMAL
	props = map[string]string{}
	halfProperties(msg, props)
	if len(props) != 0 || halfSysFlag(msg) != 0 {
		t.Fatalf("a NORMAL message got %v, sysFlag %d", props, halfSysFlag(msg))
	}
}

// fakeTelemetry is a Telemetry stream carrying a client id.
type fakeTelemetry struct {
	grpc.ServerStream
	ctx  context.Context
	sent []*rmqpb.TelemetryCommand
}

func (f *fakeTelemetry) Context() context.Context               { return f.ctx }
func (f *fakeTelemetry) Send(c *rmqpb.TelemetryCommand) error   { f.sent = append(f.sent, c); return nil }
func (f *fakeTelemetry) Recv() (*rmqpb.TelemetryCommand, error) { return nil, context.Canceled }

func newFakeTelemetry(id string) *fakeTelemetry {
	return &fakeTelemetry{ctx: metadata.NewIncomingContext(context.Background(), metadata.Pairs(clientIDHeader, id))}
}

func publishing(topics ...string) *rmqpb.Settings {
	p := &rmqpb.Publishing{}
	for _, t := range topics {
		p.Topics = append(p.Topics, &rmqpb.Resource{Name: t})
	}
	return &rmqpb.Settings{PubSub: &rmqpb.Settings_Publishing{Publishing: p}}
}

// TestClientRegistry: producers are indexed by their publishing topics from their latest
// settings, a client that sent transactions is preferred for check-backs, a newer stream of the
// same client replaces the older one, and a client is forgotten when its stream ends.
func TestClientRegistry(t *testing.T) {
	r := newClientRegistry()
	a := r.open(newFakeTelemetry("A"))
	b := r.open(newFakeTelemetry("B"))
	if err := b.send(&rmqpb.TelemetryCommand{}); err != nil || len(b.stream.(*fakeTelemetry).sent) != 1 {
		t.Fatalf("send: %v", err)
	}
	b.stream.(*fakeTelemetry).sent = nil
	r.update(a, publishing("T1", "T2"))
	r.update(b, publishing("T2"))
	if got := r.producerTopics(); len(got) != 2 || got[0] != "T1" || got[1] != "T2" {
		t.Fatalf("topics %v", got)
	}
	select {
	case <-r.changed:
	default:
		t.Fatal("no change signalled")
	}
	if r.publisher("T1") != a || r.publisher("T3") != nil {
		t.Fatal("publisher of T1 is not A, or T3 has one")
	}
	r.markTransactional("B")
	for range 20 {
		if r.publisher("T2") != b {
			t.Fatal("the transactional producer B is not preferred for T2")
		}
	}
	a2 := r.open(newFakeTelemetry("A")) // A reconnects; the old stream ends later
	r.close(a)
	if r.publisher("T1") != a2 {
		t.Fatal("the replaced stream's end forgot the client")
	}
	r.update(a2, publishing("T2"))
	if got := r.producerTopics(); len(got) != 1 || got[0] != "T2" {
		t.Fatalf("topics after A's new settings %v", got)
	}
	r.close(a2)
	r.close(b)
	if got := r.producerTopics(); len(got) != 0 {
		t.Fatalf("topics after every stream ended %v", got)
	}
	if err := b.send(&rmqpb.TelemetryCommand{}); err == nil || len(b.stream.(*fakeTelemetry).sent) != 0 {
		t.Fatalf("send on an ended stream: %v, want an error and nothing written", err)
	}
}

// TestHeartbeatAsksForSettings: a client whose settings the proxy lacks is answered
// UNRECOGNIZED_CLIENT_TYPE (the clients then send them again); once they came, OK.
func TestHeartbeatAsksForSettings(t *testing.T) {
	m := &messaging{clients: newClientRegistry()}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(clientIDHeader, "A"))
	if r, err := m.Heartbeat(ctx, &rmqpb.HeartbeatRequest{}); err != nil || r.GetStatus().GetCode() != rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE {
		t.Fatalf("heartbeat of an unknown client: %v %v", r.GetStatus(), err)
	}
	c := m.clients.open(newFakeTelemetry("A"))
	m.clients.update(c, publishing("T"))
	if r, err := m.Heartbeat(ctx, &rmqpb.HeartbeatRequest{}); err != nil || r.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Fatalf("heartbeat of a known client: %v %v", r.GetStatus(), err)
	}
}

// blockedTelemetry is a stream whose Send blocks until release is closed (a client that stops
// reading).
type blockedTelemetry struct {
	fakeTelemetry
	release chan struct{}
	mu      sync.Mutex
	n       int
}

func (b *blockedTelemetry) Send(*rmqpb.TelemetryCommand) error {
	<-b.release
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
	return nil
}

// TestPushQueue: commands pushed to a client that does not read wait in a bounded queue (one
// writer, then errClientBusy), and are all written, in order, once it reads again.
func TestPushQueue(t *testing.T) {
	r := newClientRegistry()
	st := &blockedTelemetry{fakeTelemetry: *newFakeTelemetry("A"), release: make(chan struct{})}
	c := r.open(st)
	push := func(i int) {
		if err := c.push(&rmqpb.TelemetryCommand{}, hclog.NewNullLogger()); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	push(0)
	waitFor(t, "the writer to take the first command", func() bool {
		c.qmu.Lock()
		defer c.qmu.Unlock()
		return len(c.queue) == 0
	})
	for i := 1; i <= maxPushQueue; i++ {
		push(i)
	}
	if err := c.push(&rmqpb.TelemetryCommand{}, hclog.NewNullLogger()); !errors.Is(err, errClientBusy) {
		t.Fatalf("push to a full queue: %v, want errClientBusy", err)
	}
	close(st.release)
	waitFor(t, "every queued command written", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.n == maxPushQueue+1
	})
}
