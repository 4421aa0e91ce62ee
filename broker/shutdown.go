package broker

// Graceful shutdown (Close). The order, and why:
//
//  1. DLedger leader: propose the queued offsets, then hand leadership to the most up-to-date
//     follower (handOff). This node keeps serving as a follower, forwarding writes to the new
//     leader, so a producer whose route still names this node loses nothing.
//  2. Stop registering and unregister from every name server: routes stop naming this node.
//  3. DLedger mode: drain. Producers refresh routes only every 30 s (the Go client; Java's
//     default too), so sends keep arriving here until they do. Serve them (forwarded) until no
//     send has arrived for drainQuiet, at most shutdownDrainMaxMillis. Classic mode has nowhere
//     to forward to, so it does not wait for clients to move.
//  4. Wait for in-flight requests, bounded by inflightWait, then stop accepting and close every
//     connection (remoting.Server.Close).
//  5. Stop the background tasks, persist offsets and POP state, flush and close the store
//     (in DLedger mode after Raft stops, so nothing applies to a closed store).
//
// Every wait is bounded whatever the Raft state (a group without a leader, peers that accept
// connections and never answer): the hand-off (handOffTimeout), unregistration, the drain, the
// in-flight sends (inflightWait), the batcher and Raft's stop (dledger/shutdown.go). As a last
// resort mqbroker stops waiting for Close after ShutdownBound and exits, which releases the
// store lock whatever Close was stuck on.

import (
	"sync/atomic"
	"time"

	"rocketraft/remoting"
)

// drainQuiet is how long no send must arrive before a draining node stops waiting for clients.
const drainQuiet = time.Second

// inflightWait bounds the wait for requests being served when the server closes.
const inflightWait = 5 * time.Second

// shutdownGrace is what ShutdownBound allows beyond the drain: the sum of the other bounded
// waits (hand-off 3 s, unregistration 3 s, in-flight sends 5 s, batcher 3 s, Raft 5 s and its
// watchers 2 s) with room for the store's flush.
const shutdownGrace = 25 * time.Second

// ShutdownBound is how long Close may take: shutdownDrainMaxMillis plus shutdownGrace. mqbroker
// exits when Close has not returned by then (cmd/mqbroker/main.go).
func (b *Broker) ShutdownBound() time.Duration {
	return time.Duration(max(b.cfg.ShutdownDrainMaxMillis, 0))*time.Millisecond + shutdownGrace
}

// shutdownState tracks what Close needs to drain: whether registration stopped, when the last
// send arrived and how many sends are being served. Only sends are counted: they are always
// answered by their handler (OnRequest sees them), unlike parked pulls, answered later.
type shutdownState struct {
	draining atomic.Bool
	lastSend atomic.Int64 // unix ns of the last send request's arrival
	inflight atomic.Int64 // sends being served (not oneway ones, which get no answer)
}

// isSendCode reports the requests that store messages: the ones a stale route keeps sending.
func isSendCode(code int32) bool {
	switch code {
	case remoting.SendMessage, remoting.SendMessageV2, remoting.SendBatchMessage:
		return true
	}
	return false
}

// intercept is the remoting server's interceptor: it counts a send in (answered in observe)
// and applies the ACL when enabled.
func (b *Broker) intercept(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if isSendCode(req.Code) {
		b.sd.lastSend.Store(req.ReceivedOrNow().UnixNano())
		if !req.IsOneway() {
			b.sd.inflight.Add(1)
		}
	}
	if b.acl != nil {
		return b.aclGate.check(conn, req)
	}
	return nil
}

// observe is called once a request is answered: metrics, and the in-flight count of sends.
func (b *Broker) observe(code, respCode int32, elapsed time.Duration) {
	if isSendCode(code) {
		b.sd.inflight.Add(-1)
	}
	b.metrics.rpc.Observe(code, respCode, elapsed)
}

// drainClients waits, in DLedger mode, until producers stop sending here (see the file comment).
func (b *Broker) drainClients() {
	limit := time.Duration(b.cfg.ShutdownDrainMaxMillis) * time.Millisecond
	if !b.place.forwardsWrites() || limit <= 0 {
		return
	}
	start := time.Now()
	deadline := start.Add(limit)
	for time.Now().Before(deadline) {
		last := time.Unix(0, b.sd.lastSend.Load())
		if time.Since(last) >= drainQuiet && time.Since(start) >= drainQuiet {
			b.logger.Info("shutdown: no more sends arriving", "waited", time.Since(start).Round(time.Millisecond))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.logger.Warn("shutdown: clients still sending at the end of the drain", "shutdownDrainMaxMillis", b.cfg.ShutdownDrainMaxMillis)
}

// waitInflight waits until no send is being served, at most inflightWait, so none loses its
// answer to the connection close. Parked pulls are not waited for: consumers pull again.
func (b *Broker) waitInflight() {
	deadline := time.Now().Add(inflightWait)
	for b.sd.inflight.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.sd.inflight.Load(); n > 0 {
		b.logger.Warn("shutdown: requests still in flight when the server closed", "count", n)
	}
}
