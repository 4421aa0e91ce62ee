package proxy

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/pop"
	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// fakeAckBroker answers BATCH_ACK_MESSAGE with ackedNum batchAcked and ACK_MESSAGE with
// SUCCESS except for the offsets in stale (NO_MESSAGE), recording what it got.
type fakeAckBroker struct {
	srv        *remoting.Server
	batchAcked string
	stale      map[string]bool
	mu         sync.Mutex
	batches    []protocol.BatchAckBody
	singles    []string // offsets
}

func startFakeAckBroker(t *testing.T, batchAcked string, stale ...string) *fakeAckBroker {
	f := &fakeAckBroker{srv: remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}), batchAcked: batchAcked, stale: map[string]bool{}}
	for _, s := range stale {
		f.stale[s] = true
	}
	f.srv.Handle(remoting.BatchAckMessage, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		var b protocol.BatchAckBody
		if err := protocol.Decode(req.Body, &b); err != nil {
			return req.NewResponse(remoting.MessageIllegal, err.Error())
		}
		f.mu.Lock()
		f.batches = append(f.batches, b)
		f.mu.Unlock()
		resp := req.NewResponse(remoting.Success, "")
		resp.SetExt("ackedNum", f.batchAcked)
		return resp
	})
	f.srv.Handle(remoting.AckMessage, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		f.mu.Lock()
		f.singles = append(f.singles, req.Ext("offset"))
		f.mu.Unlock()
		if f.stale[req.Ext("offset")] {
			return req.NewResponse(remoting.NoMessage, "stale")
		}
		return req.NewResponse(remoting.Success, "")
	})
	if err := f.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.srv.Close() })
	return f
}

func ackTestProxy(t *testing.T, addr string) *messaging {
	cfg := DefaultConfig()
	cl := remoting.NewClient(remoting.ClientConfig{})
	t.Cleanup(func() { _ = cl.Close() })
	m := &messaging{cfg: &cfg, cl: cl, log: hclog.NewNullLogger()}
	m.leaders = newLeaderBook(&cfg, cl, hclog.NewNullLogger())
	m.routes = newRouteCache(&cfg, cl, m.leaders)
	m.routes.m["T"] = cachedRoute{at: time.Now().Add(time.Hour), r: &protocol.TopicRouteData{
		QueueDatas:  []*protocol.QueueData{{BrokerName: "a", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}},
		BrokerDatas: []*protocol.BrokerData{{BrokerName: "a", BrokerAddrs: map[int64]string{0: addr}}},
	}}
	return m
}

func handle(off int64) *rmqpb.AckMessageEntry {
	ei := pop.ExtraInfo{CkQueueOffset: 10, PopTime: 1000, InvisibleTime: 10000, BrokerName: "a", QueueID: 0, MsgQueueOffset: off}
	return &rmqpb.AckMessageEntry{ReceiptHandle: ei.String()}
}

// TestAckMessageBatches: several entries of one group go as one batch ack; when the broker acks
// fewer than sent, each is acked singly for its own status; one entry is a plain ACK.
func TestAckMessageBatches(t *testing.T) {
	ctx := context.Background()
	req := func(es ...*rmqpb.AckMessageEntry) *rmqpb.AckMessageRequest {
		return &rmqpb.AckMessageRequest{Group: &rmqpb.Resource{Name: "G"}, Topic: &rmqpb.Resource{Name: "T"}, Entries: es}
	}
	codes := func(r *rmqpb.AckMessageResponse) []rmqpb.Code {
		var out []rmqpb.Code
		for _, e := range r.GetEntries() {
			out = append(out, e.GetStatus().GetCode())
		}
		return out
	}

	f := startFakeAckBroker(t, "2")
	resp, err := ackTestProxy(t, f.srv.Addr()).AckMessage(ctx, req(handle(10), handle(12)))
	if err != nil || resp.GetStatus().GetCode() != rmqpb.Code_OK || len(f.batches) != 1 || len(f.singles) != 0 {
		t.Fatalf("batch of 2: %v %v, %d batches %v singles", resp, err, len(f.batches), f.singles)
	}
	if a := f.batches[0].Acks; len(a) != 1 || a[0].StartOffset != 10 || a[0].PopTime != 1000 || len(a[0].Offsets()) != 2 || a[0].Offsets()[1] != 12 {
		t.Fatalf("batch body %+v", f.batches[0])
	}

	f = startFakeAckBroker(t, "1", "12")
	resp, _ = ackTestProxy(t, f.srv.Addr()).AckMessage(ctx, req(handle(10), handle(12), &rmqpb.AckMessageEntry{ReceiptHandle: "junk"}))
	want := []rmqpb.Code{rmqpb.Code_OK, rmqpb.Code_INVALID_RECEIPT_HANDLE, rmqpb.Code_INVALID_RECEIPT_HANDLE}
	if got := codes(resp); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || len(f.singles) != 2 {
		t.Fatalf("partial batch: %v, want %v; singles %v", got, want, f.singles)
	}

	f = startFakeAckBroker(t, "9")
	resp, _ = ackTestProxy(t, f.srv.Addr()).AckMessage(ctx, req(handle(11)))
	if got := codes(resp); len(got) != 1 || got[0] != rmqpb.Code_OK || len(f.batches) != 0 || len(f.singles) != 1 {
		t.Fatalf("one entry: %v, %d batches, singles %v", got, len(f.batches), f.singles)
	}
}
