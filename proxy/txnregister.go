package proxy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// A broker's transaction check-back asks a connection of the half message's producer group
// (broker/txn/check.go). The proxy sends with producer group = topic, so it registers itself with
// HEART_BEAT as a producer of every topic its clients publish, at every node of the groups
// holding those topics (slaves and followers too: a node that becomes master already knows the
// proxy). A registration is renewed well within the brokers' channel expiry
// (clientChannelExpiredTimeout, 120 s by default, also their idle timeout), again at once when
// the connection to a broker was replaced, and when the published topics change; a topic no
// client publishes any more is unregistered.

// Registration timing.
const (
	registerEvery   = 20 * time.Second // renewal, far inside the brokers' 120 s expiry
	registerTick    = time.Second      // how often connections and routes are looked at
	registerTimeout = 2 * time.Second  // one HEART_BEAT or UNREGISTER_CLIENT
	registerBackoff = 2 * time.Second  // after a failed HEART_BEAT to an address
)

// producerRegistrar keeps the proxy registered as a producer at the brokers.
type producerRegistrar struct {
	id      string // the proxy's client id at the brokers
	cl      *remoting.Client
	routes  *routeCache
	clients *clientRegistry
	log     hclog.Logger

	mu    sync.Mutex
	names map[*remoting.Conn]string // group (broker name) of each registered connection
	state map[string]*registration  // by broker address

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// registration is what one broker address knows of the proxy.
type registration struct {
	name     string
	conn     *remoting.Conn
	groups   []string // sorted
	at       time.Time
	failedAt time.Time
}

func newProducerRegistrar(id string, cl *remoting.Client, routes *routeCache, clients *clientRegistry, log hclog.Logger) *producerRegistrar {
	return &producerRegistrar{id: id, cl: cl, routes: routes, clients: clients, log: log,
		names: map[*remoting.Conn]string{}, state: map[string]*registration{},
		stop: make(chan struct{}), done: make(chan struct{})}
}

// run registers until close.
func (p *producerRegistrar) run() {
	defer close(p.done)
	t := time.NewTicker(registerTick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		case <-p.clients.changed:
		}
		p.round()
	}
}

// close stops the registrar (registrations lapse at the brokers when the connections close).
func (p *producerRegistrar) close() {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}

// brokerName is the group of a registered broker connection ("" when unknown).
func (p *producerRegistrar) brokerName(conn *remoting.Conn) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.names[conn]
}

// round brings every broker's registration up to date.
func (p *producerRegistrar) round() {
	topics := p.clients.producerTopics()
	if len(topics) == 0 && len(p.state) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*registerTimeout)
	defer cancel()
	type wanted struct {
		name   string
		groups []string
	}
	want := map[string]*wanted{}
	complete := true
	for _, t := range topics {
		r, err := p.routes.get(ctx, t)
		if err != nil {
			complete = false
			p.log.Debug("producer registration: no route", "topic", t, "error", err)
			continue
		}
		for _, bd := range r.BrokerDatas {
			for _, addr := range bd.BrokerAddrs {
				w := want[addr]
				if w == nil {
					w = &wanted{name: bd.BrokerName}
					want[addr] = w
				}
				if !slices.Contains(w.groups, t) {
					w.groups = append(w.groups, t)
				}
			}
		}
	}
	now := time.Now()
	for _, addr := range slices.Sorted(maps.Keys(want)) {
		w := want[addr]
		slices.Sort(w.groups)
		st := p.state[addr]
		conn := p.cl.Open(addr)
		if st != nil && conn != nil && conn == st.conn && slices.Equal(st.groups, w.groups) && now.Sub(st.at) < registerEvery {
			continue
		}
		if st != nil && now.Sub(st.failedAt) < registerBackoff {
			continue
		}
		if st == nil {
			st = &registration{}
			p.state[addr] = st
		}
		if err := p.heartbeat(ctx, addr, w.groups); err != nil {
			st.failedAt = now
			p.log.Debug("producer registration failed", "broker", addr, "error", err)
			continue
		}
		for _, g := range st.groups {
			if !slices.Contains(w.groups, g) {
				p.unregister(ctx, addr, g)
			}
		}
		if !slices.Equal(st.groups, w.groups) || st.conn != p.cl.Open(addr) {
			p.log.Info("registered as the producer of the published topics", "broker", addr, "group", w.name,
				"topics", len(w.groups), "client_id", p.id)
		}
		p.mu.Lock()
		if st.conn != nil {
			delete(p.names, st.conn)
		}
		st.name, st.conn, st.groups, st.at, st.failedAt = w.name, p.cl.Open(addr), w.groups, now, time.Time{}
		if st.conn != nil {
			p.names[st.conn] = w.name
		}
		p.mu.Unlock()
	}
	if !complete {
		return // a route not read: keep what may still be needed
	}
	for addr, st := range p.state {
		if want[addr] != nil {
			continue
		}
		for _, g := range st.groups {
			p.unregister(ctx, addr, g)
		}
		p.log.Info("no published topic at this broker any more; unregistered", "broker", addr, "group", st.name)
		p.mu.Lock()
		delete(p.names, st.conn)
		delete(p.state, addr)
		p.mu.Unlock()
	}
}

// heartbeat registers the proxy at addr as a producer of groups.
func (p *producerRegistrar) heartbeat(ctx context.Context, addr string, groups []string) error {
	hb := protocol.HeartbeatData{ClientID: p.id, ProducerDataSet: make([]protocol.ProducerData, 0, len(groups)),
		ConsumerDataSet: []protocol.ConsumerData{}}
	for _, g := range groups {
		hb.ProducerDataSet = append(hb.ProducerDataSet, protocol.ProducerData{GroupName: g})
	}
	body, err := protocol.Encode(hb)
	if err != nil {
		return err
	}
	ictx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	r, err := p.cl.Invoke(ictx, addr, remoting.NewRequest(remoting.HeartBeat, nil, body))
	if err != nil {
		return err
	}
	if r.Code != remoting.Success {
		return fmt.Errorf("HEART_BEAT to %s: code %d %s", addr, r.Code, r.Remark)
	}
	return nil
}

// unregister withdraws the proxy from producer group g at addr (best effort: the brokers'
// channel expiry drops it anyway).
func (p *producerRegistrar) unregister(ctx context.Context, addr, g string) {
	ictx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	req := remoting.NewRequest(remoting.UnregisterClient, map[string]string{"clientID": p.id, "producerGroup": g}, nil)
	if _, err := p.cl.Invoke(ictx, addr, req); err != nil {
		p.log.Debug("producer unregistration failed", "broker", addr, "group", g, "error", err)
	}
}
