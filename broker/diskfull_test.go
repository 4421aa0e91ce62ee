package broker

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage/vfs"
)

// diskLeader is a DLedger-mode broker that believes it leads, over a state machine whose store
// sits on a MemFS reporting usage used/100 (the ratio is the default 75 %), its CommitLog the
// replicated one without a batcher (a proposal would panic: the refusal must come first),
// served on a real connection so handleSend sees a client address.
func diskLeader(t *testing.T, used uint64) (*raftPlace, string) {
	t.Helper()
	f := memFSM(t, &vfs.Usage{Total: 100, Used: used})
	topics, err := meta.OpenTopics(filepath.Join(t.TempDir(), "topics.json"), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := topics.Put(&protocol.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: protocol.PermRead | protocol.PermWrite}); err != nil {
		t.Fatal(err)
	}
	cfg := config.NewBroker()
	cfg.BrokerName = "broker-d"
	rg := &raftGroup{fsm: f, selfID: "n0", group: "broker-d"}
	rg.readCtx, rg.stopReads = context.WithCancel(context.Background())
	t.Cleanup(rg.stopReads)
	rp := newRaftPlace(rg, cfg, nil, hclog.NewNullLogger())
	t.Cleanup(rp.offsetBatch.close)
	rp.role.set(roleLeader)
	logger := hclog.NewNullLogger()
	var rt runtimeConfig
	snd := &sender{cfg: cfg, logger: logger, place: rp, commitLog: rp, topics: topics, stats: newStats(),
		fwd: &forwarder{place: rp, cfg: cfg, logger: logger}, brokerPermission: func() int32 { return rt.permission(cfg) },
		storeHost: func() netip.AddrPort { return netip.AddrPort{} }}
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	srv.Handle(remoting.SendMessage, snd.handleSend)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return rp, srv.Addr()
}

func sendOne(t *testing.T, addr string) *remoting.Command {
	t.Helper()
	return sendOneExt(t, addr, nil)
}

// sendOneExt sends one message to topic T with extra header fields.
func sendOneExt(t *testing.T, addr string, extra map[string]string) *remoting.Command {
	t.Helper()
	c := remoting.NewClient(remoting.ClientConfig{DialTimeout: 3 * time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: 0, BornTimestamp: 1}
	ext := h.ToExt()
	for k, v := range extra {
		ext[k] = v
	}
	resp, err := c.Invoke(ctx, addr, remoting.NewRequest(remoting.SendMessage, ext, []byte("hello")))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// The DLedger leader refuses a send when its disk usage is over diskMaxUsedSpaceRatio, before
// proposing anything to Raft, with SERVICE_NOT_AVAILABLE and a remark saying why (as classic
// mode does); with room, the send is proposed.
func TestDLegerSendRefusedOverDiskRatio(t *testing.T) {
	_, addr := diskLeader(t, 90)
	resp := sendOne(t, addr) // reaching the batcher would panic (nil): the refusal comes first
	if resp.Code != remoting.ServiceNotAvailable {
		t.Fatalf("code %d (%s), want SERVICE_NOT_AVAILABLE", resp.Code, resp.Remark)
	}
	for _, want := range []string{"disk full", "leader n0 of group broker-d", "90.00% is over diskMaxUsedSpaceRatio 75%"} {
		if !strings.Contains(resp.Remark, want) {
			t.Fatalf("remark %q does not say %q", resp.Remark, want)
		}
	}

	if refusedForGood(resp) {
		t.Fatalf("a client's own send got the followers' final-refusal mark: %v", resp.ExtFields)
	}
	// The same send forwarded by a follower: the answer says the refusal is final, so the
	// follower relays it at once instead of retrying it for forwardWait.
	fwd := sendOneExt(t, addr, map[string]string{extForwarded: "n1", extBornHost: "127.0.0.1:9"})
	if fwd.Code != remoting.ServiceNotAvailable || !refusedForGood(fwd) {
		t.Fatalf("forwarded send answered %d %v (%s), want a final SERVICE_NOT_AVAILABLE", fwd.Code, fwd.ExtFields, fwd.Remark)
	}

	rp, _ := diskLeader(t, 10)
	if err := rp.checkSpace([][]byte{[]byte("hello")}); err != nil {
		t.Fatalf("space check with room: %v", err)
	}
}
