package proxy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Leader tracking. Clients of the proxy never re-resolve anything: the proxy alone must know
// where each broker group's master is at every moment. It learns that from three sources, the
// freshest winning:
//   - routes from the name servers (routeCache.get calls observeRoute with every route it
//     gets): brokerId 0 of each group, which is a DLedger group's ready leader, or, while a group
//     has none, a follower the name servers publish as stand-in master (namesrv/query.go): a
//     follower forwards writes and POPs to the leader (broker/forward.go);
//   - answers of a follower that forwarded a request to the leader: protocol.ExtLeaderAddr names
//     the leader's address (learn);
//   - a broken connection (remoting.ClientConfig.OnConnClose) or a refused dial: the address is
//     marked down, and when it was a group's master the name servers are asked again at once,
//     then every leaderPoll until they name a master that is not down (lost).
//
// A down mark lasts downFor: long enough that the route the name servers still hold for a few
// milliseconds after a kill (until they notice the dead broker's connection close, which happens
// at the same moment as the proxy's) is not taken for news, short enough that a leader whose
// connection to the proxy alone broke is used again at once after (a dead one refuses the next
// dial, which marks it down again).

const (
	// leaderPoll is how often the name servers are asked while a group has no usable master.
	leaderPoll = 50 * time.Millisecond
	// downFor is how long an address whose connection broke is not taken as a master.
	downFor = 500 * time.Millisecond
	// pollFor bounds one round of polling when nobody is waiting any more.
	pollFor = 10 * time.Second
)

// leaderBook is the proxy's view of every broker group's master.
type leaderBook struct {
	cfg *Config
	cl  *remoting.Client
	log hclog.Logger

	mu     sync.Mutex
	groups map[string]*groupLeader
	down   map[string]time.Time // address -> when its connection broke
}

// groupLeader is one broker group's master as the proxy knows it.
type groupLeader struct {
	master  string        // "" while unknown
	source  string        // where master was learned, for the log
	changed chan struct{} // closed (and replaced) whenever master changes
	polling bool
}

func newLeaderBook(cfg *Config, cl *remoting.Client, log hclog.Logger) *leaderBook {
	return &leaderBook{cfg: cfg, cl: cl, log: log, groups: map[string]*groupLeader{}, down: map[string]time.Time{}}
}

// group returns brokerName's entry, creating it; the caller holds mu.
func (b *leaderBook) group(brokerName string) *groupLeader {
	g := b.groups[brokerName]
	if g == nil {
		g = &groupLeader{changed: make(chan struct{})}
		b.groups[brokerName] = g
	}
	return g
}

// isDown reports whether addr's connection broke less than downFor ago; the caller holds mu.
func (b *leaderBook) isDown(addr string, now time.Time) bool {
	at, ok := b.down[addr]
	if ok && now.Sub(at) >= downFor {
		delete(b.down, addr)
		return false
	}
	return ok
}

// setMaster records addr as brokerName's master; the caller holds mu.
func (b *leaderBook) setMaster(brokerName, addr, source string) {
	g := b.group(brokerName)
	if g.master == addr {
		return
	}
	old := g.master
	g.master, g.source = addr, source
	close(g.changed)
	g.changed = make(chan struct{})
	if addr != "" {
		b.log.Info("broker group master", "brokerName", brokerName, "addr", addr, "was", old, "learned from", source)
	}
}

// observeRoute takes each group's brokerId 0 of a route fresh from a name server.
func (b *leaderBook) observeRoute(r *protocol.TopicRouteData) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, bd := range r.BrokerDatas {
		if a := bd.MasterAddr(); a != "" && !b.isDown(a, now) {
			b.setMaster(bd.BrokerName, a, "route")
		}
	}
}

// learn records addr, named by a broker's answer as the leader it forwarded to, as brokerName's
// master.
func (b *leaderBook) learn(brokerName, addr string) {
	if addr == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.down, addr) // it just answered
	b.setMaster(brokerName, addr, "forwarding answer")
}

// lost marks addr down (its connection broke, or a dial was refused) and starts looking for a
// new master of every group it was the master of.
func (b *leaderBook) lost(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.down[addr] = time.Now()
	for name, g := range b.groups {
		if g.master == addr {
			b.log.Info("connection to a broker group's master lost: asking the name servers", "brokerName", name, "addr", addr)
			b.setMaster(name, "", "")
			b.startPoll(name, g)
		}
	}
}

// notMaster records that addr refused a write as not (or no longer) brokerName's leader: the
// next send goes elsewhere once the name servers name another master.
func (b *leaderBook) notMaster(brokerName, addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.group(brokerName)
	if g.master == addr {
		b.setMaster(brokerName, "", "")
		b.startPoll(brokerName, g)
	}
}

// master returns brokerName's master, fallback (from a cached route) when none is known yet and
// fallback is not down, or waits within ctx for one while the name servers are polled.
func (b *leaderBook) master(ctx context.Context, brokerName, fallback string) (string, error) {
	for {
		b.mu.Lock()
		g := b.group(brokerName)
		if g.master == "" && fallback != "" && !b.isDown(fallback, time.Now()) && !g.polling {
			b.setMaster(brokerName, fallback, "cached route")
		}
		addr, changed := g.master, g.changed
		if addr == "" {
			b.startPoll(brokerName, g)
		}
		b.mu.Unlock()
		if addr != "" {
			return addr, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return "", fmt.Errorf("no master of broker group %s known yet: %w", brokerName, ctx.Err())
		}
	}
}

// startPoll starts asking the name servers for brokerName's master, unless that is under way;
// the caller holds mu.
func (b *leaderBook) startPoll(brokerName string, g *groupLeader) {
	if g.polling {
		return
	}
	g.polling = true
	go b.poll(brokerName)
}

// poll asks the name servers for the route of the topic named after brokerName (every broker
// registers it) at once and then every leaderPoll, until the group has a usable master or
// pollFor has passed.
func (b *leaderBook) poll(brokerName string) {
	deadline := time.Now().Add(pollFor)
	defer func() {
		b.mu.Lock()
		b.group(brokerName).polling = false
		b.mu.Unlock()
	}()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := fetchRoute(ctx, b.cfg, b.cl, brokerName)
		cancel()
		if err == nil {
			b.observeRoute(r)
		} else {
			b.log.Debug("asking the name servers for a group's master", "brokerName", brokerName, "error", err)
		}
		b.mu.Lock()
		found := b.group(brokerName).master != ""
		b.mu.Unlock()
		if found || time.Now().After(deadline) {
			return
		}
		time.Sleep(leaderPoll)
	}
}
