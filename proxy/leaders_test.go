package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

func routeWithMaster(brokerName, master string) *protocol.TopicRouteData {
	return &protocol.TopicRouteData{BrokerDatas: []*protocol.BrokerData{{BrokerName: brokerName, BrokerAddrs: map[int64]string{0: master}}}}
}

// TestLeaderBook: a route names the master; a lost connection makes it unknown (senders wait)
// and a route still naming the dead address is not believed; a forwarding answer naming the new
// leader wakes the waiters.
func TestLeaderBook(t *testing.T) {
	cfg := DefaultConfig()
	cfg.NamesrvAddr = "127.0.0.1:1" // refuses: polling finds nothing
	cl := remoting.NewClient(remoting.ClientConfig{})
	defer cl.Close()
	b := newLeaderBook(&cfg, cl, hclog.NewNullLogger())
	b.observeRoute(routeWithMaster("g", "10.0.0.1:10911"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if a, err := b.master(ctx, "g", ""); err != nil || a != "10.0.0.1:10911" {
		t.Fatalf("master %q %v", a, err)
	}
	b.lost("10.0.0.1:10911")
	b.observeRoute(routeWithMaster("g", "10.0.0.1:10911")) // the name servers have not noticed yet
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	if a, err := b.master(short, "g", "10.0.0.1:10911"); err == nil {
		t.Fatalf("master %q right after its connection broke", a)
	}
	cancelShort()
	got := make(chan string, 1)
	go func() {
		a, _ := b.master(ctx, "g", "")
		got <- a
	}()
	time.Sleep(50 * time.Millisecond)
	b.learn("g", "10.0.0.2:10911")
	select {
	case a := <-got:
		if a != "10.0.0.2:10911" {
			t.Fatalf("waiter got %q", a)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a waiter was not woken by the new leader")
	}
	b.notMaster("g", "10.0.0.2:10911")
	b.observeRoute(routeWithMaster("g", "10.0.0.3:10911"))
	if a, _ := b.master(ctx, "g", ""); a != "10.0.0.3:10911" {
		t.Fatalf("after a refusal and a new route: %q", a)
	}
}
