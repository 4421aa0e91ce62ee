package clients

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// peer is a test server that records NOTIFY_CONSUMER_IDS_CHANGED requests; conns dialled to it
// are real *remoting.Conn values for the manager to hold.
type peer struct {
	srv      *remoting.Server
	mu       sync.Mutex
	received []string // consumerGroup of each notification
	got      chan struct{}
}

func newPeer(t *testing.T) *peer {
	t.Helper()
	p := &peer{srv: remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"}), got: make(chan struct{}, 100)}
	p.srv.Handle(remoting.NotifyConsumerIDsChanged, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		p.mu.Lock()
		p.received = append(p.received, req.Ext("consumerGroup"))
		p.mu.Unlock()
		p.got <- struct{}{}
		return nil
	})
	if err := p.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// dial opens a new connection (one client per connection, as each RocketMQ client instance has
// its own).
func (p *peer) dial(t *testing.T) *remoting.Conn {
	t.Helper()
	c := remoting.NewClient(remoting.ClientConfig{})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.Conn(ctx, p.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// recorder is a fake Notify that counts calls per (connection, group) and checks the manager's
// lock is not held while it runs.
type recorder struct {
	t     *testing.T
	m     *Manager
	mu    sync.Mutex
	calls map[string]int
}

func newRecorded(t *testing.T, cfg Config) (*Manager, *recorder) {
	r := &recorder{t: t, calls: map[string]int{}}
	cfg.Notify = r.notify
	r.m = NewManager(cfg)
	return r.m, r
}

func (r *recorder) notify(conn *remoting.Conn, group string) {
	if !r.m.mu.TryLock() {
		r.t.Errorf("Notify called with the manager lock held")
	} else {
		r.m.mu.Unlock()
	}
	r.mu.Lock()
	r.calls[fmt.Sprintf("%d/%s", conn.ID(), group)]++
	r.mu.Unlock()
}

// take returns and resets the calls so far.
func (r *recorder) take() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = map[string]int{}
	return c
}

func key(conn *remoting.Conn, group string) string { return fmt.Sprintf("%d/%s", conn.ID(), group) }

// expect asserts that exactly the given (conn, group) pairs were notified, once each.
func (r *recorder) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	got := r.take()
	w := map[string]int{}
	for _, k := range want {
		w[k]++
	}
	if fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("%s: notifications %v, want %v", what, got, w)
	}
}

func consumerHB(clientID string, groups ...string) *protocol.HeartbeatData {
	hb := &protocol.HeartbeatData{ClientID: clientID}
	for _, g := range groups {
		hb.ConsumerDataSet = append(hb.ConsumerDataSet, protocol.ConsumerData{
			GroupName:        g,
			ConsumeType:      protocol.ConsumePassively,
			MessageModel:     protocol.Clustering,
			ConsumeFromWhere: protocol.ConsumeFromLastOffset,
			SubscriptionDataSet: []protocol.SubscriptionData{
				{Topic: "T", SubString: "*", ExpressionType: protocol.ExpressionTag, SubVersion: 1},
				{Topic: "%RETRY%" + g, SubString: "*", ExpressionType: protocol.ExpressionTag, SubVersion: 1},
			},
		})
	}
	return hb
}
