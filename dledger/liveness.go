package dledger

import (
	"errors"
	"io"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Fast failover.
//
// A follower of hashicorp/raft notices a dead leader only when its heartbeat timer, re-armed at a
// random [HeartbeatTimeout, 2*HeartbeatTimeout) whatever the traffic, fires at least one
// HeartbeatTimeout after the last contact: 0.5-1.5 s with our 500 ms, before the election and
// the new leader's first commit. When the leader's process dies, though, its kernel closes its
// sockets at once: a follower that holds an idle TCP connection to the leader's Raft port reads
// EOF within a millisecond, and a second dial is refused. That is proof enough that the leader is
// gone (a partition or a stalled leader never produces it, so those still take the timeouts,
// which is what keeps a slow disk from causing elections), and the surviving voters campaign at
// once instead of waiting.
//
// They campaign with a TimeoutNow RPC sent to themselves: the library's leadership-transfer path,
// whose vote requests other followers grant although they still remember the dead leader (a plain
// election would be refused by that stickiness until their own timers fire). Raft's safety does
// not depend on who campaigns or when: a voter still grants only a candidate whose log is at least
// as up to date as its own. To avoid split votes the survivors take turns in configuration order,
// fastCampaignStagger (400 ms) apart, each only if no new leader has appeared meanwhile; the first one
// wins unless its log is behind, and then the next one, whose log is longer, wins instead. The
// second one knows that as soon as the first one's vote request arrives (noteVoteRequest compares
// the request's last log entry with its own) and campaigns then instead of after the stagger.

const (
	// probeDialTimeout bounds the probe connection and the confirming dial.
	probeDialTimeout = 300 * time.Millisecond
	// probeRecheck is how often a probe checks that the leader it watches is still the leader.
	probeRecheck = 200 * time.Millisecond
	// fastCampaignStagger separates the survivors' campaigns. A later survivor must see the
	// earlier one's vote request first (granting it means standing down), and a voter persists
	// its term and vote with an fsync before it answers, which took up to ~200 ms with the disk
	// busy: a shorter stagger split the vote once in a 20-kill run (two candidates in one term,
	// then an election timeout).
	fastCampaignStagger = 400 * time.Millisecond
)

// watchLeader holds a probe connection to the current leader's Raft port while this node is a
// follower, and starts a fast election when the leader's process is gone.
func (n *Node) watchLeader() {
	defer n.observerWG.Done()
	for {
		select {
		case <-n.stop:
			return
		default:
		}
		addr, id := n.raft.LeaderWithID()
		if n.raft.State() != raft.Follower || addr == "" || string(id) == n.cfg.SelfID {
			n.sleep(50 * time.Millisecond)
			continue
		}
		term := n.raft.CurrentTerm() // the leader's term while we follow it
		if n.probe(string(id), string(addr)) {
			n.campaignAfterLeaderDeath(string(id), term)
		}
	}
}

// sleep waits d or until shutdown.
func (n *Node) sleep(d time.Duration) {
	select {
	case <-n.stop:
	case <-time.After(d):
	}
}

// probe connects to the leader's Raft port and reads until the connection ends, the leader
// changes, or this node stops. It reports whether the leader's process is gone: the connection
// ended and a new dial is refused.
func (n *Node) probe(id, addr string) (dead bool) {
	// Through the stream layer: with a group secret the probe authenticates like any peer
	// connection, so the leader keeps it open instead of dropping it at the handshake deadline.
	conn, err := n.trans.stream.Dial(raft.ServerAddress(addr), probeDialTimeout)
	if err != nil {
		if refused(err) {
			return n.stillLeader(id)
		}
		n.sleep(probeRecheck)
		return false
	}
	defer conn.Close()
	buf := make([]byte, 1)
	for {
		select {
		case <-n.stop:
			return false
		default:
		}
		if _, cur := n.raft.LeaderWithID(); string(cur) != id {
			return false
		}
		_ = conn.SetReadDeadline(time.Now().Add(probeRecheck))
		_, err := conn.Read(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		if err == nil { // the transport never writes first; ignore and keep watching
			continue
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			return false
		}
		c, derr := net.DialTimeout("tcp", addr, probeDialTimeout)
		if derr == nil {
			c.Close()
			return false // the listener is still there: not a dead process
		}
		return refused(derr) && n.stillLeader(id)
	}
}

// stillLeader reports whether this node still follows id (no other leader took over yet).
func (n *Node) stillLeader(id string) bool {
	_, cur := n.raft.LeaderWithID()
	return string(cur) == id && n.raft.State() == raft.Follower
}

// votedForOtherSince reports whether this node granted its vote to another candidate in a term
// after term (hashicorp/raft persists its vote in the stable store before answering).
func (n *Node) votedForOtherSince(term uint64) bool {
	vt, err := n.stab.GetUint64([]byte("LastVoteTerm"))
	if err != nil || vt <= term {
		return false
	}
	cand, err := n.stab.Get([]byte("LastVoteCand"))
	if err != nil {
		return false
	}
	return string(cand) != n.cfg.SelfID && string(cand) != n.Addr()
}

func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// campaignAfterLeaderDeath makes this node campaign now if it is the first surviving voter in
// configuration order, or after fastCampaignStagger per voter before it if no new leader has
// appeared by then. The second survivor does not wait out the stagger when the first one's vote
// request shows a log behind its own (this node refuses that vote, so the first cannot win):
// with entries in flight at the kill, the two followers' logs often differ by an entry or two.
// Non-voters never campaign. leaderTerm is the dead leader's term.
func (n *Node) campaignAfterLeaderDeath(dead string, leaderTerm uint64) {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	var survivors []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != dead {
			survivors = append(survivors, string(s.ID))
		}
	}
	rank := slices.Index(survivors, n.cfg.SelfID)
	if rank < 0 {
		return
	}
	start := time.Now()
	early := false
	if rank > 0 {
		early = n.awaitTurn(time.Duration(rank)*fastCampaignStagger, rank == 1, leaderTerm)
		if _, cur := n.raft.LeaderWithID(); cur != "" && string(cur) != dead {
			return // someone else won
		}
		if n.raft.State() != raft.Follower || n.votedForOtherSince(leaderTerm) {
			return // an earlier survivor is campaigning with our vote: it wins unless it dies too
		}
	}
	self := raft.ServerAddress(n.Addr())
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte(n.cfg.SelfID),
		Addr:            n.trans.EncodePeer(raft.ServerID(n.cfg.SelfID), self),
	}}
	// Handed to Raft directly, not over the network: the inbound gate honours TimeoutNow only
	// from the leader (rpcgate.go), and this one is our own.
	if err := n.trans.in.local(req, n.cfg.ElectionTimeout+transportTimeout); err != nil {
		n.cfg.Logger.Warn("fast failover: could not start a campaign", "deadLeader", dead, "error", err)
		return
	}
	n.cfg.Logger.Info("fast failover: the leader's process is gone (connection closed, dial refused); campaigning now",
		"deadLeader", dead, "rank", rank, "waited", time.Since(start).Round(time.Millisecond), "earlierCandidateBehind", early)
	// Leave the campaign time to finish before probing again.
	n.sleep(n.cfg.ElectionTimeout)
}

// awaitTurn waits up to d for this node's turn to campaign; with stopEarly it returns as soon as
// a candidate after leaderTerm asked for this node's vote with a log behind its own (reported
// true).
func (n *Node) awaitTurn(d time.Duration, stopEarly bool, leaderTerm uint64) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if stopEarly && n.behindCandidateTerm.Load() > leaderTerm {
			return true
		}
		select {
		case <-n.stop:
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return false
}

// noteVoteRequest runs on Raft's goroutine as each vote request arrives (an observer filter that
// keeps nothing): it records the request's term when the candidate's log is behind this node's,
// which is when this node refuses the vote.
func (n *Node) noteVoteRequest(o *raft.Observation) bool {
	req, ok := o.Data.(raft.RequestVoteRequest)
	if !ok {
		return false
	}
	idx := n.raft.LastIndex()
	var last raft.Log
	if err := n.logStore.GetLog(idx, &last); err != nil {
		return false // only a snapshot here: no judgement
	}
	if logBehind(req.LastLogTerm, req.LastLogIndex, last.Term, last.Index) {
		for {
			cur := n.behindCandidateTerm.Load()
			if req.Term <= cur || n.behindCandidateTerm.CompareAndSwap(cur, req.Term) {
				break
			}
		}
	}
	return false
}

// logBehind reports whether a log ending at (term, index) is less up to date than one ending at
// (ourTerm, ourIndex), Raft's rule for refusing a vote.
func logBehind(term, index, ourTerm, ourIndex uint64) bool {
	return term < ourTerm || (term == ourTerm && index < ourIndex)
}
