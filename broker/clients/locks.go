package clients

import (
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
