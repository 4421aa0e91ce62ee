package broker

// Group membership as one DLedger node sees it, and the preferred leader.
//
// Joining (dLegerJoin=true): a node with no Raft state does not bootstrap; it waits, registering
// nothing (roleUnknown), until the leader adds it (mqadmin addPeer, AddVoter). The leader then
// sends it the latest snapshot (the store's files) and the log after it; the first contact makes
// it a follower, so it registers as a slave under brokerId <its dLegerPeers position>+1. Its
// catch-up is logged (watchMembership): when it joined, the snapshot install by Raft and the
// state machine, then "joined the group and caught up" with the time and MB/s.
//
// Removal (mqadmin removePeer, RemoveServer): the leader stops replicating to the removed node,
// which usually receives the configuration entry that drops it. Such a node keeps running (a
// process that exited would be restarted by its supervisor and come back as the same lone
// non-member, i.e. crash-loop), but once its latest configuration does not list it as a voter
// and no leader has contacted it for removalGrace it: logs a warning saying it was removed,
// drops to roleUnknown (registers nothing, refuses writes) and unregisters from the name servers.
// Adding it back (addPeer with the same id) makes it a follower again. A node removed while it
// was down never learns of it from Raft (it just starts elections nobody grants), nor does one
// removed while the leader was still catching it up one RPC at a time (hashicorp/raft's
// replicateTo takes the stop signal between RPCs and skips the best-effort final send);
// raftStatus shows the real membership, and the operator stops it.
//
// Preferred leader (preferredLeaderId): the ready leader checks every preferredCheckInterval
// whether the preferred node is a voter, reachable (its GET_RAFT_STATUS, found through the
// route) and caught up (same term, following us, heard from us within the heartbeat timeout,
// applied index within preferredMaxLag of our commit index). After preferredHealthyChecks
// consecutive good checks (so a node that just restarted, or is still catching up, or flaps, is
// left alone) it transfers leadership (hashicorp/raft replicates to the target before handing
// over). A failed transfer backs off (preferredBackoffMin doubling to preferredBackoffMax), and
// when leadership comes back to this node within preferredFlapWindow of a hand-over (the
// preferred node died again) the next hand-over needs a healthy streak twice as long, so a
// flapping preferred node never causes a transfer loop.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"rocketraft/dledger"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

const (
	// membershipCheckInterval is how often watchRole looks at the configuration and catch-up.
	membershipCheckInterval = 250 * time.Millisecond
	// catchUpLogInterval spaces the "catching up" progress lines; catchUpQuiet is how long a
	// follower must stay behind before the first one.
	catchUpLogInterval = 5 * time.Second
	catchUpQuiet       = time.Second
	// catchUpLag is how many entries behind its commit index a follower may be and still count
	// as caught up (under load a healthy follower is a few entries behind).
	catchUpLag = 64
	// reUnregisterDelay: a registration that was in flight when the node noticed its removal
	// may land after the first unregistration, so it unregisters once more after this.
	reUnregisterDelay = 2 * registerTimeout

	preferredCheckInterval = time.Second
	preferredHealthyChecks = 3
	preferredMaxLag        = catchUpLag
	preferredBackoffMin    = 2 * time.Second
	preferredBackoffMax    = 30 * time.Second
	preferredRPCTimeout    = time.Second
	preferredTransferWait  = 5 * time.Second
	preferredFlapWindow    = time.Minute
	preferredMaxFlapShift  = 4 // at most 16x the healthy streak
)

// heartbeatTimeout is the node's effective Raft heartbeat timeout.
func (b *Broker) heartbeatTimeout() time.Duration {
	if d := b.cfg.DLegerHeartbeatTimeout(); d > 0 {
		return d
	}
	return dledger.DefaultHeartbeatTimeout
}

// removalGrace is how long a node outside the configuration must go without a leader's
// contact before it counts as removed: a node that joins by snapshot briefly holds the
// snapshot's older configuration (without itself) while the leader is still feeding it.
func (b *Broker) removalGrace() time.Duration { return max(4*b.heartbeatTimeout(), 2*time.Second) }

// memberWatch is watchRole's membership and catch-up state; only watchRole's goroutine uses it.
type memberWatch struct {
	next time.Time // next check

	// joining: the node started with no configuration; joinedAt is the leader's first contact;
	// nextLeaderAsk spaces the questions to the leader about its commit index.
	joining       bool
	joinedAt      time.Time
	nextLeaderAsk time.Time

	// behindSince is when the node fell more than catchUpLag entries behind (zero: caught up).
	behindSince  time.Time
	behindFrom   uint64
	announced    bool // "catching up" was logged for this spell
	lastLog      time.Time
	lastLogIndex uint64

	removedAt      time.Time
	reUnregistered bool

	divergedHandled bool // watchDiverged took this node out
}

func newMemberWatch(rp *raftPlace) *memberWatch {
	return &memberWatch{joining: !rp.node.Membership().Configured}
}

// watchMembership runs on watchRole's ticks: removal and re-admission, and catch-up logging.
func (b *Broker) watchMembership(rp *raftPlace, w *memberWatch, now time.Time) {
	if now.Before(w.next) {
		return
	}
	w.next = now.Add(membershipCheckInterval)
	b.watchDiverged(rp, w)
	if w.divergedHandled {
		return
	}
	m := rp.node.Membership()
	b.checkRemoved(rp, w, m, now)
	b.logCatchUp(rp, w, m, now)
}

// checkRemoved notices this node's removal from (and return to) the configuration.
func (b *Broker) checkRemoved(rp *raftPlace, w *memberWatch, m dledger.Membership, now time.Time) {
	rg := rp
	if rg.removed.Load() {
		if m.Voter || (m.LeaderID != "" && m.LeaderID != rg.selfID) {
			rg.removed.Store(false)
			b.logger.Info("this node is a member of the Raft group again", "self", rg.selfID, "leader", m.LeaderID)
			return
		}
		if !w.reUnregistered && now.Sub(w.removedAt) >= reUnregisterDelay {
			w.reUnregistered = true
			b.unregisterAsync()
		}
		return
	}
	noLeader := m.LeaderID == "" || m.LeaderID == rg.selfID
	if !m.Configured || m.Voter || rg.node.IsLeader() || !noLeader || now.Sub(m.LastContact) < b.removalGrace() {
		return
	}
	rg.removed.Store(true)
	w.removedAt, w.reUnregistered = now, false
	rp.setRole(roleUnknown)
	b.logger.Warn("this node was removed from the Raft group: it is not a voter in the latest configuration and no leader has contacted it since; "+
		"it unregisters from the name servers, registers nothing and serves no writes from now on, and keeps running so that it can be added back "+
		"(mqadmin addPeer with the same id); stop it if it is retired",
		"self", rg.selfID, "group", b.cfg.DLegerGroup, "configurationSize", m.Servers,
		"lastLeaderContact", m.LastContact.Format(time.RFC3339Nano))
	b.unregisterAsync()
}

// unregisterAsync unregisters from every name server without holding up watchRole.
func (b *Broker) unregisterAsync() {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.reg.unregisterAll()
	}()
}

// logCatchUp logs how a follower that is behind catches up, and when a joining node first
// hears from the leader and has caught up.
func (b *Broker) logCatchUp(rp *raftPlace, w *memberWatch, m dledger.Membership, now time.Time) {
	r := rp.node.Raft()
	applied, commit := r.AppliedIndex(), r.CommitIndex()
	if w.joining {
		b.logJoining(rp, w, m, applied, commit, now)
	}
	if rp.role.get() == roleLeader {
		w.behindSince = time.Time{}
		return
	}
	lag := uint64(0)
	if commit > applied {
		lag = commit - applied
	}
	// A lag that lasts under catchUpQuiet is load, not catching up: it is not logged.
	switch {
	case lag > catchUpLag && w.behindSince.IsZero():
		w.behindSince, w.behindFrom, w.announced = now, applied, false
	case lag > catchUpLag && !w.announced && now.Sub(w.behindSince) >= catchUpQuiet:
		w.announced, w.lastLog, w.lastLogIndex = true, now, applied
		b.logger.Info("catching up with the leader", "appliedIndex", applied, "commitIndex", commit, "behind", lag)
	case lag > catchUpLag && w.announced && now.Sub(w.lastLog) >= catchUpLogInterval:
		rate := float64(applied-w.lastLogIndex) / now.Sub(w.lastLog).Seconds()
		w.lastLog, w.lastLogIndex = now, applied
		b.logger.Info("catching up with the leader", "appliedIndex", applied, "commitIndex", commit, "behind", lag,
			"entriesPerSec", fmt.Sprintf("%.0f", rate), "commitLogMaxOffset", b.commitLogMax())
	case lag <= catchUpLag && !w.behindSince.IsZero():
		if w.announced {
			b.logger.Info("caught up with the leader", "appliedIndex", applied, "commitIndex", commit,
				"entries", applied-w.behindFrom, "took", now.Sub(w.behindSince).Round(time.Millisecond))
		}
		w.behindSince = time.Time{}
	}
}

// logJoining logs a joining node's first contact from the leader and, once its applied index
// is within catchUpLag of the leader's commit index (asked of the leader itself: a follower's
// own commit index only covers the entries it has received), the time the catch-up took.
func (b *Broker) logJoining(rp *raftPlace, w *memberWatch, m dledger.Membership, applied, commit uint64, now time.Time) {
	if w.joinedAt.IsZero() {
		if !m.Configured && m.LeaderID == "" {
			return
		}
		w.joinedAt, w.nextLeaderAsk = now, now
		b.logger.Info("joining: the leader has added this node; catching up from its snapshot and log", "leader", m.LeaderID, "appliedIndex", applied)
		return
	}
	if commit == 0 || now.Before(w.nextLeaderAsk) || rp.role.get() == roleLeader {
		return
	}
	w.nextLeaderAsk = now.Add(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), preferredRPCTimeout)
	defer cancel()
	addr := b.leaderBrokerAddr(ctx)
	if addr == "" {
		return
	}
	ls, err := b.peerRaftStatus(ctx, addr)
	if err != nil || ls.Role != protocol.RaftLeader || applied+catchUpLag < ls.CommitIndex {
		return
	}
	w.joining = false
	took := now.Sub(w.joinedAt)
	bytes := b.commitLogMax()
	b.logger.Info("joined the group and caught up", "appliedIndex", applied, "leaderCommitIndex", ls.CommitIndex,
		"commitLogBytes", bytes, "took", took.Round(time.Millisecond),
		"MBps", fmt.Sprintf("%.1f", float64(bytes)/(1<<20)/max(took.Seconds(), 0.001)))
}

// commitLogMax is the replicated store's commitlog max offset (0 when it cannot be read now).
func (b *Broker) commitLogMax() int64 {
	st, release, err := b.acquireStore()
	if err != nil {
		return 0
	}
	defer release()
	return st.CommitLogMaxOffset()
}

// ---- preferred leader ----

// preferredLeaderLoop hands leadership to preferredLeaderId whenever this node is the ready
// leader and the preferred node is healthy and caught up (see the file comment).
func (b *Broker) preferredLeaderLoop(rp *raftPlace) {
	defer b.wg.Done()
	want := b.cfg.PreferredLeaderID
	t := time.NewTimer(preferredCheckInterval)
	defer t.Stop()
	healthy := 0
	backoff := time.Duration(0)
	addr := "" // the preferred node's broker address last found
	// flaps counts hand-overs that came back to this node within preferredFlapWindow (the
	// preferred node lost leadership again soon after getting it): each doubles the healthy
	// streak the next hand-over needs.
	flaps := 0
	var handedAt time.Time
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		next := preferredCheckInterval
		if rp.role.get() != roleLeader || rp.excluded() {
			healthy = 0
			t.Reset(next)
			continue
		}
		err := b.checkPreferred(rp, &addr)
		switch {
		case err != nil:
			if healthy > 0 {
				b.logger.Debug("preferred leader not ready for a transfer", "preferredLeaderId", want, "reason", err)
			}
			healthy = 0
		case healthy+1 < preferredHealthyChecks<<min(flaps, preferredMaxFlapShift):
			healthy++
		default:
			healthy = 0
			if err := b.transferToPreferred(rp, want); err != nil {
				backoff = min(max(2*backoff, preferredBackoffMin), preferredBackoffMax)
				next = backoff
				b.logger.Warn("leadership transfer to the preferred leader failed; backing off", "preferredLeaderId", want, "retryIn", backoff, "error", err)
				break
			}
			backoff = 0
			if now := time.Now(); !handedAt.IsZero() && now.Sub(handedAt) < preferredFlapWindow {
				flaps++
				b.logger.Warn("the preferred leader lost leadership soon after the previous hand-over; the next one waits longer",
					"preferredLeaderId", want, "healthyChecksNeeded", preferredHealthyChecks<<min(flaps, preferredMaxFlapShift))
			} else {
				flaps = 0
			}
			handedAt = time.Now()
		}
		t.Reset(next)
	}
}

// transferToPreferred hands leadership to id and logs the outcome.
func (b *Broker) transferToPreferred(rp *raftPlace, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), preferredTransferWait)
	defer cancel()
	start := time.Now()
	b.logger.Info("handing leadership to the preferred leader: it is a voter, reachable and caught up", "preferredLeaderId", id)
	if err := rp.node.TransferLeadership(ctx, id); err != nil {
		return fmt.Errorf("transfer leadership to preferredLeaderId %s: %w", id, err)
	}
	b.logger.Info("leadership handed to the preferred leader", "preferredLeaderId", id, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// errPreferredNotFound: the name servers' route has no address answering as the preferred node.
var errPreferredNotFound = errors.New("the preferred leader is not registered (or not answering) under this broker name")

// checkPreferred reports why the preferred node should not take over now (nil: it may). *addr
// caches the preferred node's broker address between checks.
func (b *Broker) checkPreferred(rp *raftPlace, addr *string) error {
	want := b.cfg.PreferredLeaderID
	st := rp.node.Status()
	voter := false
	for _, p := range st.Configuration {
		voter = voter || (p.ID == want && p.Suffrage == "Voter")
	}
	if !voter {
		return fmt.Errorf("%s is not a voter in the configuration", want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*preferredRPCTimeout)
	defer cancel()
	var rs *protocol.RaftStatus
	if *addr != "" {
		if s, err := b.peerRaftStatus(ctx, *addr); err == nil && s.NodeID == want {
			rs = s
		}
	}
	if rs == nil {
		*addr = ""
		a, s, err := b.findPreferred(ctx, rp, want)
		if err != nil {
			return err
		}
		*addr, rs = a, s
	}
	return judgePreferred(rs, st, b.heartbeatTimeout())
}

// judgePreferred decides from the preferred node's own status whether it is following this
// leader closely enough to take over: same term, this node as its leader, contact within the
// heartbeat timeout, applied index within preferredMaxLag of our commit index.
func judgePreferred(rs *protocol.RaftStatus, leader dledger.Status, heartbeat time.Duration) error {
	switch {
	case rs.Role != protocol.RaftFollower:
		return fmt.Errorf("%s is %s, not a follower", rs.NodeID, rs.Role)
	case rs.Term != leader.Term:
		return fmt.Errorf("%s is in term %d, we are in %d", rs.NodeID, rs.Term, leader.Term)
	case rs.LeaderID != leader.ID:
		return fmt.Errorf("%s follows %q, not us (%s)", rs.NodeID, rs.LeaderID, leader.ID)
	case rs.LastContactAgoMs < 0 || time.Duration(rs.LastContactAgoMs)*time.Millisecond > heartbeat:
		return fmt.Errorf("%s last heard from us %d ms ago", rs.NodeID, rs.LastContactAgoMs)
	case rs.AppliedIndex+preferredMaxLag < leader.CommitIndex:
		return fmt.Errorf("%s applied %d, our commit index is %d", rs.NodeID, rs.AppliedIndex, leader.CommitIndex)
	}
	return nil
}

// findPreferred looks for the node answering as want among this broker name's registered
// addresses: first under the brokerId its dLegerPeers position gives it, then the others.
func (b *Broker) findPreferred(ctx context.Context, rp *raftPlace, want string) (string, *protocol.RaftStatus, error) {
	guess := int64(-1)
	for i, p := range rp.peers {
		if p.ID == want {
			guess = int64(i) + 1
		}
	}
	var lastErr error = errPreferredNotFound
	for _, ns := range b.cfg.NamesrvAddrs() {
		addrs, err := b.routeBrokerAddrs(ctx, ns)
		if err != nil {
			lastErr = err
			continue
		}
		order := []string{addrs[guess]}
		for id, a := range addrs {
			if id != guess {
				order = append(order, a)
			}
		}
		for _, a := range order {
			if a == "" || a == b.brokerAddr {
				continue
			}
			rs, err := b.peerRaftStatus(ctx, a)
			if err != nil {
				lastErr = err
				continue
			}
			if rs.NodeID == want {
				return a, rs, nil
			}
		}
	}
	return "", nil, fmt.Errorf("find preferred leader %s: %w", want, lastErr)
}

// routeBrokerAddrs reads this broker group's brokerId -> address map from one name server.
func (b *Broker) routeBrokerAddrs(ctx context.Context, ns string) (map[int64]string, error) {
	h := protocol.GetRouteInfoRequestHeader{Topic: b.cfg.BrokerName}
	resp, err := b.nsClient.Invoke(ctx, ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, h.ToExt(), nil))
	if err != nil {
		return nil, fmt.Errorf("route of %s from %s: %w", b.cfg.BrokerName, ns, err)
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("route of %s from %s: code %d %s", b.cfg.BrokerName, ns, resp.Code, resp.Remark)
	}
	var rd protocol.TopicRouteData
	if err := protocol.Decode(resp.Body, &rd); err != nil {
		return nil, fmt.Errorf("decode route of %s: %w", b.cfg.BrokerName, err)
	}
	for _, bd := range rd.BrokerDatas {
		if bd != nil && bd.BrokerName == b.cfg.BrokerName {
			return bd.BrokerAddrs, nil
		}
	}
	return nil, fmt.Errorf("route of %s from %s lists no such broker", b.cfg.BrokerName, ns)
}

// peerRaftStatus asks another member for its GET_RAFT_STATUS.
func (b *Broker) peerRaftStatus(ctx context.Context, addr string) (*protocol.RaftStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, preferredRPCTimeout)
	defer cancel()
	resp, err := b.fwdClient.Invoke(ctx, addr, remoting.NewRequest(remoting.GetRaftStatus, nil, nil))
	if err != nil {
		b.fwdClient.CloseAddr(addr) // a dead or restarted peer: dial afresh next time
		return nil, fmt.Errorf("raft status of %s: %w", addr, err)
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("raft status of %s: code %d %s", addr, resp.Code, resp.Remark)
	}
	var rs protocol.RaftStatus
	if err := protocol.Decode(resp.Body, &rs); err != nil {
		return nil, fmt.Errorf("decode raft status of %s: %w", addr, err)
	}
	return &rs, nil
}
