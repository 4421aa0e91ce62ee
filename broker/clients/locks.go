package clients

import (
	"cmp"
	"slices"
	"time"

	"rocketraft/protocol"
)

type lockEntry struct {
	clientID   string
	lastUpdate time.Time
}

func (e *lockEntry) expired(now time.Time, expiry time.Duration) bool {
	return now.Sub(e.lastUpdate) > expiry
}

// LockBatch tries to lock each queue for clientID in group (LOCK_BATCH_MQ). A queue is taken if
// it is free, already held by clientID, or its holder's lock has expired; taking it refreshes the
// lock time. It returns the queues now held by clientID, in request order.
func (m *Manager) LockBatch(group, clientID string, mqs []protocol.MessageQueue, now time.Time) []protocol.MessageQueue {
	out := make([]protocol.MessageQueue, 0, len(mqs))
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	table := m.locks[group]
	if table == nil {
		table = map[protocol.MessageQueue]*lockEntry{}
		m.locks[group] = table
	}
	for _, mq := range mqs {
		e := table[mq]
		switch {
		case e == nil:
			table[mq] = &lockEntry{clientID: clientID, lastUpdate: now}
		case e.clientID == clientID:
			e.lastUpdate = now
		case e.expired(now, m.cfg.LockExpiry):
			m.cfg.Logger.Warn("queue lock expired, handing over", "group", group, "mq", mq.String(), "old_client", e.clientID, "new_client", clientID)
			e.clientID, e.lastUpdate = clientID, now
		default:
			continue
		}
		out = append(out, mq)
	}
	return out
}

// Lockable returns the queues among mqs that clientID may be granted in group now, without
// granting them: free queues, queues clientID holds, and, when takeOver is true, queues whose
// holder's lock has expired. A DLedger leader decides with it and then replicates the grant
// (GrantLocks on every replica); a leader younger than one lock expiry passes takeOver=false,
// so it never hands a queue to a second client on the strength of times written by another
// node's clock.
func (m *Manager) Lockable(group, clientID string, mqs []protocol.MessageQueue, now time.Time, takeOver bool) []protocol.MessageQueue {
	out := make([]protocol.MessageQueue, 0, len(mqs))
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	table := m.locks[group]
	for _, mq := range mqs {
		e := table[mq]
		if e == nil || e.clientID == clientID || (takeOver && e.expired(now, m.cfg.LockExpiry)) {
			out = append(out, mq)
		}
	}
	return out
}

// GrantLocks gives every queue in mqs to clientID in group as of now, whoever held it: the
// replicated apply of a grant the leader already decided with Lockable. It must stay
// deterministic (no clock reads): every replica applies the same grants with the same times.
func (m *Manager) GrantLocks(group, clientID string, mqs []protocol.MessageQueue, now time.Time) {
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	table := m.locks[group]
	if table == nil {
		table = map[protocol.MessageQueue]*lockEntry{}
		m.locks[group] = table
	}
	for _, mq := range mqs {
		if e := table[mq]; e != nil && e.clientID != clientID {
			m.cfg.Logger.Warn("queue lock expired, handing over", "group", group, "mq", mq.String(), "old_client", e.clientID, "new_client", clientID)
		}
		table[mq] = &lockEntry{clientID: clientID, lastUpdate: now}
	}
}

// HeldBy returns the queues among mqs whose lock entry names clientID in group, expired or not
// (what an UNLOCK by clientID would release).
func (m *Manager) HeldBy(group, clientID string, mqs []protocol.MessageQueue) []protocol.MessageQueue {
	out := make([]protocol.MessageQueue, 0, len(mqs))
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	for _, mq := range mqs {
		if e := m.locks[group][mq]; e != nil && e.clientID == clientID {
			out = append(out, mq)
		}
	}
	return out
}

// LockRecord is one queue lock as kept in a DLedger snapshot.
type LockRecord struct {
	Group      string                `json:"group"`
	ClientID   string                `json:"clientId"`
	Queue      protocol.MessageQueue `json:"mq"`
	LastUpdate int64                 `json:"lastUpdate"` // ms, the granting leader's clock
}

// LockRecords returns every lock, expired ones included (expiry is decided against the time of
// the next grant, not here), in a stable order.
func (m *Manager) LockRecords() []LockRecord {
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	var out []LockRecord
	for g, table := range m.locks {
		for mq, e := range table {
			out = append(out, LockRecord{Group: g, ClientID: e.clientID, Queue: mq, LastUpdate: e.lastUpdate.UnixMilli()})
		}
	}
	slices.SortFunc(out, func(a, b LockRecord) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Queue.Topic, b.Queue.Topic),
			cmp.Compare(a.Queue.BrokerName, b.Queue.BrokerName), cmp.Compare(a.Queue.QueueID, b.Queue.QueueID))
	})
	return out
}

// RestoreLocks replaces every lock with recs (a DLedger snapshot's; nil empties the table).
func (m *Manager) RestoreLocks(recs []LockRecord) {
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	m.locks = map[string]map[protocol.MessageQueue]*lockEntry{}
	for _, r := range recs {
		table := m.locks[r.Group]
		if table == nil {
			table = map[protocol.MessageQueue]*lockEntry{}
			m.locks[r.Group] = table
		}
		table[r.Queue] = &lockEntry{clientID: r.ClientID, lastUpdate: time.UnixMilli(r.LastUpdate)}
	}
}

// LockExpiry is how long a lock survives without being re-taken.
func (m *Manager) LockExpiry() time.Duration { return m.cfg.LockExpiry }

// UnlockBatch releases the queues among mqs that clientID holds in group (UNLOCK_BATCH_MQ).
func (m *Manager) UnlockBatch(group, clientID string, mqs []protocol.MessageQueue) {
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	table := m.locks[group]
	if table == nil {
		return
	}
	for _, mq := range mqs {
		if e := table[mq]; e != nil && e.clientID == clientID {
			delete(table, mq)
		}
	}
	if len(table) == 0 {
		delete(m.locks, group)
	}
}

// IsLocked reports whether mq holds an unexpired lock in group.
func (m *Manager) IsLocked(group string, mq protocol.MessageQueue, now time.Time) bool {
	_, ok := m.LockHolder(group, mq, now)
	return ok
}

// LockHolder returns the client id holding an unexpired lock on mq in group.
func (m *Manager) LockHolder(group string, mq protocol.MessageQueue, now time.Time) (string, bool) {
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	e := m.locks[group][mq]
	if e == nil || e.expired(now, m.cfg.LockExpiry) {
		return "", false
	}
	return e.clientID, true
}

// HasLocks reports whether any queue is held by an unexpired lock in group ([5.x] sends back to
// such a group go to the DLQ, §2.4 step 7).
func (m *Manager) HasLocks(group string, now time.Time) bool {
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	for _, e := range m.locks[group] {
		if !e.expired(now, m.cfg.LockExpiry) {
			return true
		}
	}
	return false
}
