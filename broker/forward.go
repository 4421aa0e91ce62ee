package broker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// Extension fields a follower adds to a write it forwards to the leader. A forwarded request is
// never forwarded again (no loops while leadership moves), and the original client's address
// stays the message's born host.
const (
	extForwarded = "__rrForwarded"
	extBornHost  = "__rrBornHost"
)

// extRefusal is set by the leader on a SERVICE_NOT_AVAILABLE answer that waiting cannot change
// (refusalDiskFull: its disk is over diskMaxUsedSpaceRatio), so a follower that forwarded the
// write relays it at once instead of retrying it for forwardWait as it does when the answer
// comes from a node that is not, or no longer, the leader.
const (
	extRefusal      = "__rrRefusal"
	refusalDiskFull = "diskFull"
)

// markRefusal flags resp, the answer to req, a write that failed with err, when req was forwarded
// by a follower and the refusal is final (see extRefusal). Other answers are left alone.
func markRefusal(req, resp *remoting.Command, err error) {
	if req.Ext(extForwarded) != "" && errors.Is(err, storage.ErrDiskFull) {
		resp.SetExt(extRefusal, refusalDiskFull)
	}
}

// refusedForGood reports whether a forwarded write's answer is a leader's final refusal.
func refusedForGood(resp *remoting.Command) bool {
	return resp.Code == remoting.ServiceNotAvailable && resp.Ext(extRefusal) != ""
}

const (
	// forwardTimeout bounds one forwarded write: under the Go client's 3 s send timeout would
	// be nicer, but an append may legitimately take seconds on a stalled disk; the client gives
	// up on its own and retries.
	forwardTimeout = 5 * time.Second
	// leaderAddrTTL bounds how long a learned leader broker address is trusted without Raft's
	// leader id changing: the name servers' view can lag a failover by a registration.
	leaderAddrTTL = 2 * time.Second
)

// leaderAddrCache remembers the current leader's broker (remoting) address, keyed by the Raft
// leader id it was learned under.
//
// Raft knows the leader's Raft address, not its broker address. The leader registers its broker
// address as brokerId 0 at every name server the moment it is ready, so the name servers' route
// of the topic named after the broker (a system topic every broker registers) is where a follower
// learns it: no change to the Raft log or the fsm, the same source of truth clients use, and
// only looked up when a write actually needs forwarding. An address that equals ours (a stale
// route naming us as master) is never used.
type leaderAddrCache struct {
	mu       sync.Mutex
	leaderID string
	addr     string
	at       time.Time
}

// get returns the address learned under leaderID while it is fresh (leaderAddrTTL).
func (c *leaderAddrCache) get(leaderID string, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addr == "" || c.leaderID != leaderID || now.Sub(c.at) > leaderAddrTTL {
		return "", false
	}
	return c.addr, true
}

// put remembers addr as leaderID's broker address, learned at now.
func (c *leaderAddrCache) put(leaderID, addr string, now time.Time) {
	c.mu.Lock()
	c.leaderID, c.addr, c.at = leaderID, addr, now
	c.mu.Unlock()
}

// forget drops the address after it failed to answer as the leader: look it up again.
func (c *leaderAddrCache) forget() {
	c.mu.Lock()
	c.addr = ""
	c.mu.Unlock()
}

// forwarder carries a write (or a leader-only read) that reached a Raft follower to the leader
// and relays the answer, so clients with a stale route keep succeeding while leadership moves.
// It is its own type so the forwarding rules (when to retry, when an answer is final, which
// leader address to trust) can be tested with a fake place and a loopback leader, apart from
// the handlers that call it.
type forwarder struct {
	// place says whether this node forwards at all, whether it decides now, and who leads.
	place place
	// client carries the forwarded requests (Broker.fwdClient); nsClient asks the name servers
	// for the leader's broker address.
	client, nsClient *remoting.Client
	leaderAddrs      leaderAddrCache
	// cfg names the name servers and this broker group.
	cfg *config.Broker
	// self is this broker's own address, known once it listens (Broker.Addr): a route naming
	// it as master is stale.
	self   func() string
	stop   <-chan struct{}
	logger hclog.Logger
}

// leaderBrokerAddr returns the current Raft leader's broker address, or "" when no leader is
// known or the name servers do not show one other than this node yet.
func (f *forwarder) leaderBrokerAddr(ctx context.Context) string {
	id, self := f.place.leaderID()
	if id == "" || id == self {
		return ""
	}
	now := time.Now()
	if addr, ok := f.leaderAddrs.get(id, now); ok {
		return addr
	}
	for _, ns := range f.cfg.NamesrvAddrs() {
		addr, err := f.routeMaster(ctx, ns)
		if err != nil {
			f.logger.Debug("leader address lookup failed", "namesrv", ns, "error", err)
			continue
		}
		if addr == "" || addr == f.self() {
			continue
		}
		f.leaderAddrs.put(id, addr, now)
		return addr
	}
	return ""
}

// routeMaster reads brokerId 0's address of this broker group from one name server.
func (f *forwarder) routeMaster(ctx context.Context, ns string) (string, error) {
	h := protocol.GetRouteInfoRequestHeader{Topic: f.cfg.BrokerName, RegisteredOnly: true}
	resp, err := f.nsClient.Invoke(ctx, ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, h.ToExt(), nil))
	if err != nil {
		return "", fmt.Errorf("route of %s: %w", f.cfg.BrokerName, err)
	}
	if resp.Code != remoting.Success {
		return "", fmt.Errorf("route of %s: code %d %s", f.cfg.BrokerName, resp.Code, resp.Remark)
	}
	var rd protocol.TopicRouteData
	if err := protocol.Decode(resp.Body, &rd); err != nil {
		return "", fmt.Errorf("decode route of %s: %w", f.cfg.BrokerName, err)
	}
	for _, bd := range rd.BrokerDatas {
		if bd != nil && bd.BrokerName == f.cfg.BrokerName {
			return bd.BrokerAddrs[protocol.MasterID], nil
		}
	}
	return "", nil
}

// forwardWait bounds how long a write waits for a leader to forward it to: a leadership
// transfer completes in tens of milliseconds, an election after a leader's death in about a
// second, and the clients' send timeout is 3 s.
const forwardWait = 2 * time.Second

// forwardWrite sends a write this non-leader received to the leader and relays the answer, so a
// client with a stale route keeps succeeding. While no leader is known or reachable, or the
// leader answers SERVICE_NOT_AVAILABLE (it lost leadership before proposing the write: nothing
// happened), it tries again for up to forwardWait. It returns nil when the write cannot be
// forwarded (already forwarded once, no leader within forwardWait, or this node became the
// leader meanwhile): the caller then answers SERVICE_NOT_AVAILABLE or handles it itself.
// A failure before the request left this node is SERVICE_NOT_AVAILABLE too (nothing happened);
// a failure after it is SYSTEM_ERROR, since the leader may have stored it.
func (f *forwarder) forwardWrite(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	return f.forwardRetrying(conn, req, false)
}

// forwardRetrying forwards req to the leader, trying again every 20 ms for up to forwardWait while
// no leader is known or reachable, or (writes) the leader answers SERVICE_NOT_AVAILABLE for a
// reason other than a final refusal such as a full disk (refusedForGood). It
// returns nil when this node is, or becomes, the leader, and for reads whenever the leader gave
// no answer.
func (f *forwarder) forwardRetrying(conn *remoting.Conn, req *remoting.Command, read bool) *remoting.Command {
	if !f.place.forwardsWrites() || req.Ext(extForwarded) != "" {
		return nil
	}
	deadline := time.Now().Add(forwardWait)
	for {
		if f.place.decides() {
			return nil
		}
		resp := f.forward(conn, req, read)
		if resp != nil && (resp.Code != remoting.ServiceNotAvailable || refusedForGood(resp)) {
			return resp
		}
		if time.Now().After(deadline) {
			return resp
		}
		select {
		case <-f.stop:
			return resp
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// forwardRead asks the leader a read whose authoritative answer only the leader has (a consumer
// offset: the leader answers after the commits queued before the query are replicated, which
// this replica may not have applied yet). While no leader is known or reachable it tries again
// for up to forwardWait, as writes do (an election with fast failover takes well under that),
// so a reader is not handed an older value in the gap. It returns nil when the leader cannot
// answer within that time or this node became the leader: the caller then answers itself, from
// this node's replica.
func (f *forwarder) forwardRead(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	return f.forwardRetrying(conn, req, true)
}

// forward makes one attempt to carry req to the leader (forwardRetrying decides whether to try
// again): nil when this node does not forward, req was forwarded already, no leader address is
// known, or (reads) the leader gave no answer.
func (f *forwarder) forward(conn *remoting.Conn, req *remoting.Command, read bool) *remoting.Command {
	if !f.place.forwardsWrites() || req.Ext(extForwarded) != "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	addr := f.leaderBrokerAddr(ctx)
	if addr == "" {
		return nil
	}
	ext := copyExt(req.Fields())
	_, ext[extForwarded] = f.place.leaderID()
	ext[extBornHost] = conn.RemoteAddr()
	fwd := remoting.NewRequest(req.Code, ext, req.Body)
	c, err := f.client.Conn(ctx, addr)
	if err != nil {
		f.leaderAddrs.forget()
		if read {
			return nil
		}
		return req.NewResponse(remoting.ServiceNotAvailable, fmt.Sprintf("service not available now: cannot reach the leader at %s: %v", addr, err))
	}
	resp, err := c.Invoke(ctx, fwd)
	if err != nil {
		f.leaderAddrs.forget()
		f.client.CloseAddr(addr)
		if read {
			return nil
		}
		return req.NewResponse(remoting.SystemError, fmt.Sprintf("forwarding to the leader at %s failed, the outcome is unknown (retry; it may be stored twice): %v", addr, err))
	}
	if resp.Code == remoting.ServiceNotAvailable && !refusedForGood(resp) {
		f.leaderAddrs.forget() // it was not the leader (any more): look it up again next time
		if read {
			return nil
		}
	}
	out := req.NewResponse(resp.Code, resp.Remark)
	out.ExtFields, out.Body = resp.ExtFields, resp.Body
	if resp.Code != remoting.ServiceNotAvailable || refusedForGood(resp) {
		out.SetExt(protocol.ExtLeaderAddr, addr) // it answered as the leader
	}
	return out
}

// forwardUnproposed forwards a write this node refused with dledger.ErrNotLeader after taking it
// as the leader: leadership moved (a transfer, a lost lease) before the write was proposed, so it
// is certainly not in the log and the next leader can take it. It waits (up to forwardWait) for
// this node to step down, then forwards; nil means it is still the leader (a transfer that
// failed) or no leader took it, and the caller answers SERVICE_NOT_AVAILABLE.
func (f *forwarder) forwardUnproposed(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	if !f.place.forwardsWrites() || req.Ext(extForwarded) != "" {
		return nil
	}
	deadline := time.Now().Add(forwardWait)
	for f.place.decides() {
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-f.stop:
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
	return f.forwardWrite(conn, req)
}

// forwardOrRefuse handles a metadata write that reached a DLedger follower: forward it to the
// leader and relay the answer, or answer SERVICE_NOT_AVAILABLE (nothing happened). It returns
// nil on the leader and in classic mode: the caller serves the request itself.
func (f *forwarder) forwardOrRefuse(conn *remoting.Conn, req *remoting.Command) *remoting.Command {
	ok, remark := f.place.writable()
	if ok {
		return nil
	}
	if fwd := f.forwardWrite(conn, req); fwd != nil {
		return fwd
	}
	if ok, remark = f.place.writable(); ok { // it became the leader while waiting
		return nil
	}
	return req.NewResponse(remoting.ServiceNotAvailable, remark)
}

// bornHost is the client's address: the connection's peer, or for a write a follower forwarded,
// the address the follower received it from.
func bornHost(conn *remoting.Conn, req *remoting.Command) netip.AddrPort {
	if req.Ext(extForwarded) == "" || req.Ext(extBornHost) == "" {
		if ap := conn.RemoteAddrPort(); ap.IsValid() {
			return ap
		}
		return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	ap, err := netip.ParseAddrPort(req.Ext(extBornHost))
	if err != nil {
		return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
