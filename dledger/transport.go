package dledger

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"rocketraft/internal/sendtrace"
	"rocketraft/peerauth"
)

// Transport tuning: a few pooled connections per peer, and an I/O deadline long enough for a
// multi-MiB AppendEntries or a snapshot chunk on a slow link.
const (
	transportMaxPool = 3
	transportTimeout = 10 * time.Second
)

// pipelineStall is how long a pipelined AppendEntries may wait for room in the pipeline before
// the pipeline is closed (see stallGuardPipeline).
const pipelineStall = 5 * time.Second

// streamLayer is raft.StreamLayer over TCP that advertises the configured peer address verbatim
// (a host name stays a host name), where raft.NewTCPTransport insists on a resolved IP. Closing
// it also closes the connections it accepted (the library leaves them to their readers), so a
// node that shuts down looks to its peers exactly like a dead process: their connections end and
// new dials are refused, which their leader probes act on (liveness.go).
//
// The NetworkTransport only dials through it: its Accept blocks until Close, and inbound
// connections are taken by acceptConn and served by inbound (inbound.go), which knows which
// peer authenticated on each connection. With cred set, Dial proves this node's membership
// (package peerauth) before the connection is handed to the transport.
type streamLayer struct {
	ln        net.Listener
	advertise peerAddr
	cred      *peerauth.Credential // nil: no peer authentication

	closed    chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	accepted map[net.Conn]struct{}
}

func newStreamLayer(ln net.Listener, advertise string, cred *peerauth.Credential) *streamLayer {
	return &streamLayer{ln: ln, advertise: peerAddr(advertise), cred: cred, closed: make(chan struct{}), accepted: map[net.Conn]struct{}{}}
}

// Accept is the NetworkTransport's listener loop: it waits for Close (inbound.go serves the
// connections).
func (s *streamLayer) Accept() (net.Conn, error) {
	<-s.closed
	return nil, net.ErrClosed
}

// acceptConn accepts the next connection and tracks it until it is closed.
func (s *streamLayer) acceptConn() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.accepted == nil { // closed
		c.Close()
		return nil, net.ErrClosed
	}
	tc := &trackedConn{Conn: c, s: s}
	s.accepted[tc] = struct{}{}
	return tc, nil
}

// Close closes the listener and every accepted connection still open.
func (s *streamLayer) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = s.ln.Close()
		s.mu.Lock()
		conns := s.accepted
		s.accepted = nil
		s.mu.Unlock()
		for c := range conns {
			c.(*trackedConn).Conn.Close()
		}
	})
	return err
}

// trackedConn removes itself from its stream layer's set when closed.
type trackedConn struct {
	net.Conn
	s *streamLayer
}

func (c *trackedConn) Close() error {
	c.s.mu.Lock()
	delete(c.s.accepted, c)
	c.s.mu.Unlock()
	return c.Conn.Close()
}

type peerAddr string

func (a peerAddr) Network() string { return "tcp" }
func (a peerAddr) String() string  { return string(a) }

func (s *streamLayer) Addr() net.Addr { return s.advertise }

// Dial connects to a peer and, with a credential, runs the client side of the handshake: a
// peer that cannot prove the group secret gets no RPC.
func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil || s.cred == nil {
		return c, err
	}
	if err := peerauth.Client(c, peerauth.PurposeRaft, *s.cred, peerauth.DefaultTimeout); err != nil {
		c.Close()
		return nil, fmt.Errorf("raft peer %s: %w", address, err)
	}
	return c, nil
}

// netTransport is hashicorp/raft's NetworkTransport for outbound RPCs and our inbound server
// (inbound.go) for inbound ones: Consumer is inbound's channel.
type netTransport struct {
	*raft.NetworkTransport
	stream *streamLayer
	in     *inbound
}

// Consumer returns the channel inbound RPCs arrive on (inbound.go), which the
// NetworkTransport's own never receives anything on.
func (t *netTransport) Consumer() <-chan raft.RPC { return t.in.ch }

// newTransport listens on addr (or uses ln) and advertises addr. With secret set, every
// connection either way is authenticated (peerauth) and inbound RPCs must carry the node id the
// peer proved; selfID is this node's identity then.
func newTransport(addr string, ln net.Listener, logger hclog.Logger, selfID string, secret []byte) (*netTransport, error) {
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, err
		}
	}
	var cred *peerauth.Credential
	if secret != nil {
		cred = &peerauth.Credential{Identity: selfID, Key: secret}
	}
	stream := newStreamLayer(ln, addr, cred)
	nt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  stream,
		MaxPool: transportMaxPool,
		Timeout: transportTimeout,
		Logger:  logger.Named("transport"),
	})
	in := newInbound(stream, secret, logger.Named("transport"))
	go in.run()
	return &netTransport{NetworkTransport: nt, stream: stream, in: in}, nil
}

// raftTransport is what Raft is given: the NetworkTransport, with two additions.
//
// A vote request that meets a dead pooled connection is sent again. The transport pools idle
// connections per peer and never checks them, so the first request after a peer restarted goes
// down a connection the old process left behind and fails with EOF; Raft sends one vote request
// per peer per election, so one such failure made a fast failover wait for an election timeout
// (one of 20 kills in a chaos run, 994 ms). A vote request is safe to repeat: a voter that
// granted it grants it again. (TimeoutNow is not repeated: one that did arrive before its
// connection died would start a second election.)
//
// With the leader's write in parallel (t set, leaderwrite.go) an AppendEntries never carries a
// commit index beyond the leader's durable index.
//
// Heartbeats take the same road as every other RPC: through Raft's main loop. The library's
// fast path (SetHeartbeatHandler) runs a heartbeat's AppendEntries on the transport's reader
// goroutine, beside the main loop; a heartbeat from a newer leader there raises currentTerm and
// demotes a node whose leader loop is still dispatching a batch, and dispatchLogs then stamps that
// batch with the new term, which this node never led. Seen after SIGSTOP/SIGCONT of a leader: the
// resumed node wrote its own batch at the index where the new leader's no-op sits, with the same
// term, so Raft's log matching never repaired it and the replicas diverged for good. On the main
// loop the term changes only between two leader-loop steps, so every entry carries the term its
// writer was elected in. The cost is that a heartbeat waits for the follower's current RPC (an
// AppendEntries with its fsync) instead of overtaking it.
type raftTransport struct {
	*netTransport
	t *syncTracker // nil: no clamp

	fastPath    bool                // benchmarks: install the library's fast path after all
	onHeartbeat func(time.Duration) // benchmarks: each heartbeat's round trip
	log         hclog.Logger        // nil: silent
	stall       time.Duration       // pipelineStall; tests shorten it
	followers   *followerLog        // followers.go; nil: not recorded
	trace       *sendtrace.Entries  // marks entries as replicated; nil unless Config.SendTrace
	stop        <-chan struct{}     // closed when the node shuts down: ends a wait for a down peer
	downWait    time.Duration       // downPeerWait; tests shorten it
	// lastIndex is the end of the log this node's Raft writes (its log store's LastIndex), and
	// batch Raft's MaxAppendEntries: a pipeline is refused while a follower trails that end by
	// more than one batch (AppendEntriesPipeline). lastIndex nil: never refused.
	lastIndex func() (uint64, error)
	batch     uint64
}

// SetHeartbeatHandler installs no fast path, so the network transport hands heartbeats to Raft's
// main loop with every other RPC (see raftTransport).
func (c raftTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if c.fastPath {
		c.in.heartbeat.Store(&cb)
	}
}

// deadConn reports whether err is a pooled connection the peer had closed: worth one more try,
// unlike a refused dial (the peer is down) or a timeout.
func deadConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// retry runs rpc again while it fails on a dead connection, at most once per pooled connection
// plus a fresh dial.
func retry(rpc func() error) error {
	err := rpc()
	for i := 0; i < transportMaxPool && err != nil && deadConn(err); i++ {
		err = rpc()
	}
	return err
}

func (c raftTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, req *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return retry(func() error { return c.NetworkTransport.RequestVote(id, target, req, resp) })
}

func (c raftTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, req *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return retry(func() error { return c.NetworkTransport.RequestPreVote(id, target, req, resp) })
}

func (c raftTransport) clamp(req *raft.AppendEntriesRequest) {
	if c.t == nil {
		return
	}
	if d := c.t.durable.Load(); req.LeaderCommitIndex > d {
		req.LeaderCommitIndex = d
	}
}

func (c raftTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	c.clamp(req)
	if c.onHeartbeat != nil && isHeartbeat(req) {
		began := time.Now()
		err := c.NetworkTransport.AppendEntries(id, target, req, resp)
		if err == nil {
			c.onHeartbeat(time.Since(began))
			c.followers.note(id, target, req, resp)
		}
		return err
	}
	markLogs(c.trace, req.Entries, sendtrace.Sending)
	err := c.NetworkTransport.AppendEntries(id, target, req, resp)
	if err != nil && dialFailed(err) && !isHeartbeat(req) {
		err = c.awaitPeer(err, func() error {
			c.clamp(req)
			return c.NetworkTransport.AppendEntries(id, target, req, resp)
		})
	}
	if err == nil {
		c.followers.note(id, target, req, resp)
		if resp.Success {
			markLogs(c.trace, req.Entries, sendtrace.Replicated)
		}
	}
	return err
}

// A follower that cannot be dialled (its process is down, its host unreachable) makes
// hashicorp/raft's replication back off before each next try, doubling from 10 ms up to 10.24 s
// (replication.go's backoff, uncapped unlike the heartbeat's): after an outage of some seconds a
// restarted follower waited up to 10 s for the leader's next try (the catch-up benchmark saw
// 4-5 s between a follower's exec and its first entry, 2026-12-02). So a replication
// AppendEntries (never a heartbeat, which has its own capped backoff) that fails to dial is tried
// again every downPeerRetry for up to downPeerWait before the error reaches Raft: the follower is
// sent its entries within downPeerRetry of coming back, and Raft counts one failure per
// downPeerWait instead of one per try. The wait ends early when this node shuts down or stops
// leading; the call only ever blocks Raft's replication goroutine for that peer.
const (
	downPeerWait  = 30 * time.Second
	downPeerRetry = 50 * time.Millisecond
)

// isHeartbeat reports whether req is Raft's heartbeat (replication.go's heartbeat sends only the
// term and the leader).
func isHeartbeat(req *raft.AppendEntriesRequest) bool {
	return len(req.Entries) == 0 && req.PrevLogEntry == 0 && req.PrevLogTerm == 0 && req.LeaderCommitIndex == 0
}

// dialFailed reports whether err is a failure to connect to the peer (nothing was sent).
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// awaitPeer tries rpc again every downPeerRetry while it fails to dial, for up to downPeerWait,
// and returns its last outcome (err, the first failure's, if no try was made).
func (c raftTransport) awaitPeer(err error, rpc func() error) error {
	wait := c.downWait
	if wait <= 0 {
		wait = downPeerWait
	}
	deadline := time.Now().Add(wait)
	t := time.NewTimer(downPeerRetry)
	defer t.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-c.stop:
			return err
		case <-t.C:
		}
		if c.t != nil {
			if f := c.t.leading.Load(); f != nil && !(*f)() {
				return err // no longer the leader: Raft is stopping this replication
			}
		}
		if err = rpc(); err == nil || !dialFailed(err) {
			return err
		}
		t.Reset(downPeerRetry)
	}
	return err
}

// AppendEntriesPipeline refuses to pipeline to a follower that trails this node's log by more
// than one batch, so that Raft brings it up to date with plain AppendEntries first.
// hashicorp/raft's replication catches a follower up in a loop of plain AppendEntries that ends at
// the last index it read when the call began, then pipelines; a pipeline sends only when a new
// entry is written or once per CommitTimeout, at most MaxAppendEntries entries each time. A call
// that began before a wait (awaitPeer's for a follower that is down, raft's backoff after a
// failure) therefore left an idle leader pipelining the rest of the gap 64 entries per 50-100 ms:
// a restarted follower 64 MiB of small entries behind took 25 s, about 3 MB/s. Refused, Raft goes
// back to plain AppendEntries at its next trigger or CommitTimeout, and that loop runs to the
// log's end as it then is; the pipeline starts once the follower is within a batch.
// raft.ErrPipelineReplicationNotSupported is the refusal Raft takes without logging an error.
func (c raftTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if c.trailing(target) {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	p, err := c.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return p, err
	}
	if c.trace != nil {
		p = newTracedPipeline(p, c.trace)
	}
	return guardedPipeline(p, c, target), nil
}

// trailing reports whether the follower at target last reported a log ending more than one
// batch before this node's.
func (c raftTransport) trailing(target raft.ServerAddress) bool {
	if c.lastIndex == nil {
		return false
	}
	match, ok := c.followers.match(target)
	if !ok {
		return false
	}
	last, err := c.lastIndex()
	return err == nil && last > match+c.batch
}

// guardedPipeline wraps a pipeline so that its AppendEntries carries the clamped commit index
// and never waits for ever (stallGuardPipeline).
func guardedPipeline(p raft.AppendPipeline, c raftTransport, target raft.ServerAddress) *stallGuardPipeline {
	stall := c.stall
	if stall <= 0 {
		stall = pipelineStall
	}
	return &stallGuardPipeline{AppendPipeline: p, c: c, target: target, stall: stall}
}

// stallGuardPipeline closes a pipeline whose AppendEntries cannot hand a request over for
// pipelineStall. hashicorp/raft's replication stops reading a pipeline's answers as soon as one
// says the follower's term is newer or rejects the entries, but its sender may still be queueing
// requests: once the pipeline's answer and in-flight queues are full, the sender blocks for ever,
// never sees that it should stop, and Raft's Shutdown waits for it (seen: a node whose SIGTERM
// never finished, its replication goroutine stuck a minute in the pipeline after a leader
// pause). Closing the pipeline makes the blocked call fail; replication then stops or falls back
// to plain AppendEntries, as after any pipeline error.
type stallGuardPipeline struct {
	raft.AppendPipeline
	c      raftTransport
	target raft.ServerAddress
	stall  time.Duration
}

func (p *stallGuardPipeline) AppendEntries(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	p.c.clamp(req)
	guard := time.AfterFunc(p.stall, func() {
		if p.c.log != nil {
			p.c.log.Warn("raft pipeline stalled; closing it", "peer", p.target, "waited", p.stall)
		}
		p.AppendPipeline.Close()
	})
	defer guard.Stop()
	markLogs(p.c.trace, req.Entries, sendtrace.Sending)
	return p.AppendPipeline.AppendEntries(req, resp)
}
