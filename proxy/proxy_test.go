package proxy

import (
	"context"
	"testing"

	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
)

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err == nil {
		t.Fatal("a proxy without a name server validated")
	}
	c.NamesrvAddr = " 127.0.0.1:9876; 127.0.0.1:9877 ;"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.nameServers(); len(got) != 2 || got[1] != "127.0.0.1:9877" {
		t.Fatalf("name servers %q", got)
	}
	c.GrpcServerPort = 70000
	if err := c.Validate(); err == nil {
		t.Fatal("port 70000 validated")
	}
}

// TestQueuePermission: queues beyond the write count are read-only, beyond the read count
// write-only, and the group's perm bits apply to all.
func TestQueuePermission(t *testing.T) {
	qd := &protocol.QueueData{ReadQueueNums: 4, WriteQueueNums: 2, Perm: 6}
	for id, want := range []rmqpb.Permission{rmqpb.Permission_READ_WRITE, rmqpb.Permission_READ_WRITE, rmqpb.Permission_READ, rmqpb.Permission_READ, rmqpb.Permission_NONE} {
		if got := queuePermission(qd, int32(id)); got != want {
			t.Errorf("queue %d: %v, want %v", id, got, want)
		}
	}
	qd.Perm = 4 // write wiped
	if got := queuePermission(qd, 0); got != rmqpb.Permission_READ {
		t.Errorf("perm 4: %v", got)
	}
}

// TestNotYetInBand: the RPCs not served yet answer an in-band NOT_IMPLEMENTED (never a gRPC
// error, which clients treat as a broken connection), and NotifyClientTermination OK.
func TestNotYetInBand(t *testing.T) {
	m := &messaging{}
	ctx := context.Background()
	for name, call := range map[string]func() (*rmqpb.Status, error){
		"RecallMessage": func() (*rmqpb.Status, error) {
			r, err := m.RecallMessage(ctx, nil)
			return r.GetStatus(), err
		},
		"SyncLiteSubscription": func() (*rmqpb.Status, error) {
			r, err := m.SyncLiteSubscription(ctx, nil)
			return r.GetStatus(), err
		},
	} {
		st, err := call()
		if err != nil || st.GetCode() != rmqpb.Code_NOT_IMPLEMENTED {
			t.Errorf("%s: status %v, error %v; want in-band NOT_IMPLEMENTED", name, st, err)
		}
	}
	if r, err := m.NotifyClientTermination(ctx, nil); err != nil || r.GetStatus().GetCode() != rmqpb.Code_OK {
		t.Errorf("NotifyClientTermination: %v %v", r, err)
	}
}
