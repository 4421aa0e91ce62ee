package proxy

import (
	"context"
	"sync"
	"time"

	"rocketraft/acl"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// 4.x clients' membership and the requests brokers send them.
//
// The proxy holds one connection per broker for all its 4.x clients, so a broker sees every
// client (by its client id) on that connection. Each client's heartbeat goes to every group's
// master, and is sent again to a group's new master as soon as the leader book names one, so
// that consumers stay registered across a failover without waiting for their next heartbeat.
// A broker's request to a client (NOTIFY_CONSUMER_IDS_CHANGED and RESET_CONSUMER_CLIENT_OFFSET
// name the consumer group, CHECK_TRANSACTION_STATE carries the half message and so its
// producer group, GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY name the client id)
// is passed on to the connection of the client or clients it is for.

// txnMemory is how long the group of a check-back is remembered for the client's answer.
const txnMemory = time.Minute

// failoverWindow is how long after a group's master changed a pull answer of a node behind the
// consumer is taken for a node still catching up (remoting4_forward.go).
const failoverWindow = 10 * time.Second

// heartbeatFollow is how often the leader book is compared with where heartbeats last went.
const heartbeatFollow = 50 * time.Millisecond

// client4 is one connected 4.x client.
type client4 struct {
	conn      *remoting.Conn
	producers []string
	consumers []string
	heartbeat *remoting.Command // the last one, as received
}

// clients4 is the proxy's table of 4.x clients.
type clients4 struct {
	mu     sync.Mutex
	byID   map[string]*client4
	sentTo map[string]string // brokerName -> the master heartbeats last went to
	// movedAt is when heartbeatFollower last saw a group's master change.
	movedAt map[string]time.Time
	lostAt  time.Time // when a connection to a broker last broke
	txns    map[string]txnOwner
}

type txnOwner struct {
	bname string
	at    time.Time
}

func newClients4() *clients4 {
	return &clients4{byID: map[string]*client4{}, sentTo: map[string]string{}, movedAt: map[string]time.Time{}, txns: map[string]txnOwner{}}
}

// put records a client's heartbeat.
func (c *clients4) put(conn *remoting.Conn, hb *protocol.HeartbeatData, req *remoting.Command) {
	cl := &client4{conn: conn, heartbeat: clone(req)}
	for _, p := range hb.ProducerDataSet {
		cl.producers = append(cl.producers, p.GroupName)
	}
	for _, cd := range hb.ConsumerDataSet {
		cl.consumers = append(cl.consumers, cd.GroupName)
	}
	c.mu.Lock()
	c.byID[hb.ClientID] = cl
	c.mu.Unlock()
}

// sent records that heartbeats went to addr as group bname's master.
func (c *clients4) sent(bname, addr string, code int32) {
	if code != remoting.HeartBeat {
		return
	}
	c.mu.Lock()
	c.sentTo[bname] = addr
	c.mu.Unlock()
}

// conns returns the connections of the clients match accepts.
func (c *clients4) conns(match func(id string, cl *client4) bool) []*remoting.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*remoting.Conn
	for id, cl := range c.byID {
		if match(id, cl) {
			out = append(out, cl.conn)
		}
	}
	return out
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// rememberTxn notes that the check-back of a transaction (by message and transaction id) came
// from group bname.
func (c *clients4) rememberTxn(bname string, ids ...string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.txns {
		if now.Sub(v.at) > txnMemory {
			delete(c.txns, k)
		}
	}
	for _, id := range ids {
		if id != "" {
			c.txns[id] = txnOwner{bname: bname, at: now}
		}
	}
}

// txnGroup is the group a check-back of one of ids came from ("" when none is remembered).
func (c *clients4) txnGroup(ids ...string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if o, ok := c.txns[id]; ok && id != "" {
			return o.bname
		}
	}
	return ""
}

// handleHeartbeat checks the heartbeat's names, records the client and sends its heartbeat to
// every group's master.
func (f *front4) handleHeartbeat(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	var hb protocol.HeartbeatData
	if err := protocol.Decode(req.Body, &hb); err != nil {
		return req.NewResponse(remoting.SystemError, "proxy: bad heartbeat body: "+err.Error())
	}
	// The same name checks as the brokers' (protocol.HeartbeatData.ValidateNames), before the
	// client is recorded here.
	if err := hb.ValidateNames(); err != nil {
		f.log.Warn("heartbeat refused: invalid name", "remote", conn.RemoteAddr(), "error", err)
		return req.NewResponse(remoting.InvalidParameter, "proxy: invalid heartbeat: "+err.Error())
	}
	f.clients.put(conn, &hb, req)
	return f.fanOutAnswer(req)
}

// fanOutAnswer sends req to every group and answers with a success if any group took it.
func (f *front4) fanOutAnswer(req *remoting.Command) *remoting.Command {
	answers, err := f.fanOut(req)
	var last *remoting.Command
	for _, resp := range answers {
		if resp.Code == remoting.Success {
			return answerOf(req, resp)
		}
		last = resp
	}
	if last != nil {
		return answerOf(req, last)
	}
	msg := "proxy: no broker group answered"
	if err != nil {
		msg += ": " + err.Error()
	}
	return req.NewResponse(remoting.SystemError, msg)
}

// handleUnregister passes UNREGISTER_CLIENT to every group and forgets the client.
func (f *front4) handleUnregister(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	if id := req.Ext("clientID"); id != "" {
		f.clients.mu.Lock()
		delete(f.clients.byID, id)
		f.clients.mu.Unlock()
	}
	return f.fanOutAnswer(req)
}

// clientGone forgets the clients of a closed connection and unregisters them at the brokers at
// once (a client that shut down cleanly has done so itself).
func (f *front4) clientGone(conn *remoting.Conn) {
	type gone struct {
		id   string
		c    *client4
		lang string
	}
	var left []gone
	f.clients.mu.Lock()
	for id, cl := range f.clients.byID {
		if cl.conn == conn {
			left = append(left, gone{id: id, c: cl})
			delete(f.clients.byID, id)
		}
	}
	f.clients.mu.Unlock()
	if len(left) == 0 {
		return
	}
	go func() {
		for _, g := range left {
			for _, p := range g.c.producers {
				_, _ = f.fanOut(f.unregisterReq(g.c.heartbeat, g.id, "producerGroup", p))
			}
			for _, cg := range g.c.consumers {
				_, _ = f.fanOut(f.unregisterReq(g.c.heartbeat, g.id, "consumerGroup", cg))
			}
		}
	}()
}

// unregisterReq is the UNREGISTER_CLIENT the proxy sends for a client whose connection closed.
// The client did not sign it, so with ACL on the proxy signs it with its own account (which must
// be allowed the client's groups, as for everything the proxy asks on its own).
func (f *front4) unregisterReq(hb *remoting.Command, id, key, group string) *remoting.Command {
	req := remoting.NewRequest(remoting.UnregisterClient, map[string]string{"clientID": id, key: group}, nil)
	req.Language, req.Version = hb.Language, hb.Version
	if f.cfg.AccessKey != "" {
		acl.Sign(req.ExtFields, req.Body, f.cfg.AccessKey, f.cfg.SecretKey)
	}
	return req
}

// heartbeatFollower sends every client's last heartbeat to a group's new master as soon as the
// leader book knows it, until the listener closes.
func (f *front4) heartbeatFollower() {
	t := time.NewTicker(heartbeatFollow)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		type move struct{ bname, addr string }
		var moves []move
		f.clients.mu.Lock()
		for bname, addr := range f.clients.sentTo {
			if cur := f.m.leaders.current(bname); cur != "" && cur != addr {
				moves = append(moves, move{bname, cur})
				f.clients.sentTo[bname] = cur
				f.clients.movedAt[bname] = time.Now()
			}
		}
		var hbs []*remoting.Command
		if len(moves) > 0 {
			for _, cl := range f.clients.byID {
				hbs = append(hbs, cl.heartbeat)
			}
		}
		f.clients.mu.Unlock()
		for _, mv := range moves {
			f.log.Info("broker group master changed: heartbeats of 4.x clients sent to the new one",
				"brokerName", mv.bname, "addr", mv.addr, "clients", len(hbs))
			for _, hb := range hbs {
				req := clone(hb)
				addr := mv.addr
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), f.cfg.SendTimeout)
					defer cancel()
					if _, err := f.m.cl.Invoke(ctx, addr, req); err != nil {
						f.log.Debug("heartbeat to a new master", "addr", addr, "error", err)
					}
				}()
			}
		}
	}
}

// current is brokerName's master as the book knows it now ("" when unknown), without waiting.
func (b *leaderBook) current(brokerName string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.groups[brokerName]; g != nil {
		return g.master
	}
	return ""
}

// groupAt is the group whose master (or cluster table entry) is addr ("" when none).
func (f *front4) groupAt(addr string) string {
	b := f.m.leaders
	b.mu.Lock()
	for name, g := range b.groups {
		if g.master == addr {
			b.mu.Unlock()
			return name
		}
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.SendTimeout)
	defer cancel()
	names, table, err := f.cluster.get(ctx)
	if err != nil {
		return ""
	}
	for _, n := range names {
		if table[n] == addr {
			return n
		}
	}
	if len(names) == 1 {
		return names[0]
	}
	return ""
}

// brokerCallbacks serves the requests brokers send on the proxy's connections to them.
func (f *front4) brokerCallbacks() map[int32]remoting.Handler {
	toGroup := func(key string) remoting.Handler {
		return func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
			group := req.Ext(key)
			for _, c := range f.clients.conns(func(_ string, cl *client4) bool { return has(cl.consumers, group) }) {
				_ = c.InvokeOneway(clone(req))
			}
			return nil
		}
	}
	toClient := func(bconn *remoting.Conn, req *remoting.Command) *remoting.Command {
		id := req.Ext("clientId")
		conns := f.clients.conns(func(cid string, _ *client4) bool { return cid == id })
		if len(conns) == 0 {
			return req.NewResponse(remoting.SystemError, "proxy: client "+id+" is not connected")
		}
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.SendTimeout)
		defer cancel()
		resp, err := conns[0].Invoke(ctx, clone(req))
		if err != nil {
			return req.NewResponse(remoting.SystemError, "proxy: client "+id+": "+err.Error())
		}
		return answerOf(req, resp)
	}
	return map[int32]remoting.Handler{
		remoting.NotifyConsumerIDsChanged:  toGroup("consumerGroup"),
		remoting.ResetConsumerClientOffset: toGroup("group"),
		remoting.GetConsumerRunningInfo:    toClient,
		remoting.ConsumeMessageDirectly:    toClient,
		remoting.CheckTransactionState:     f.onCheckTransaction4,
	}
}

// onCheckTransaction4 passes a check-back to a connected client of the half message's producer
// group, remembering which group asked so that the client's END_TRANSACTION goes back there.
func (f *front4) onCheckTransaction4(bconn *remoting.Conn, req *remoting.Command) *remoting.Command {
	msg, _, err := message.DecodeRecord(req.Body)
	if err != nil {
		f.log.Debug("bad CHECK_TRANSACTION_STATE body", "broker", bconn.RemoteAddr(), "error", err)
		return nil
	}
	props := message.ParseProperties(msg.Properties)
	group := props[message.PropertyProducerGroup]
	if bname := f.groupAt(bconn.RemoteAddr()); bname != "" {
		f.clients.rememberTxn(bname, req.Ext("msgId"), req.Ext("transactionId"),
			props[message.PropertyUniqClientMessageID], props[message.PropertyTransactionID])
	}
	conns := f.clients.conns(func(_ string, cl *client4) bool { return has(cl.producers, group) })
	if len(conns) == 0 {
		f.log.Debug("check-back for a producer group with no 4.x client connected", "group", group)
		return nil
	}
	// Spread check-backs over the group's clients.
	c := conns[int(msg.QueueOffset%int64(len(conns)))]
	if err := c.InvokeOneway(clone(req)); err != nil {
		f.log.Debug("check-back not passed to the client", "group", group, "error", err)
	}
	return nil
}

// reheartbeat sends the last heartbeat of every client of consumer group to addr and waits for
// the answers (bounded by sendTimeout).
func (f *front4) reheartbeat(group, addr string) {
	var hbs []*remoting.Command
	f.clients.mu.Lock()
	for _, cl := range f.clients.byID {
		if has(cl.consumers, group) {
			hbs = append(hbs, clone(cl.heartbeat))
		}
	}
	f.clients.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.SendTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, hb := range hbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.m.cl.Invoke(ctx, addr, hb); err != nil {
				f.log.Debug("heartbeat before a pull", "addr", addr, "error", err)
			}
		}()
	}
	wg.Wait()
}

// connLost records that a connection to a broker broke (a failover may be under way).
func (c *clients4) connLost() {
	c.mu.Lock()
	c.lostAt = time.Now()
	c.mu.Unlock()
}

// recentlyMoved reports whether group bname's master changed, or a connection to a broker
// broke, less than failoverWindow ago.
func (c *clients4) recentlyMoved(bname string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.movedAt[bname]
	return (ok && time.Since(at) < failoverWindow) || time.Since(c.lostAt) < failoverWindow
}
