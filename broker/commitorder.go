package broker

import (
	"sync"

	"rocketraft/remoting"
)

// commitOrder keeps one client's consumer-offset commits of a queue in the order the client
// sent them. A client commits a queue's offset two ways on one connection: inside its pulls
// (the offset it had consumed to when it built the pull) and with oneway UPDATE_CONSUMER_OFFSET
// persists; the server serves a connection's requests concurrently, so under load an older
// persist can be served after a newer pull and move the queue back by the messages consumed in
// between (the fault lab read a drop of 1 this way, with no failover near it). A commit is
// therefore dropped when a request of the same connection that arrived after it has already
// committed the same queue. Commits of different connections (two clients, a reconnect, a
// follower forwarding) are not ordered against each other here: pulls and forwarded commits
// only move forward anyway (commitPullOffset, handleUpdateConsumerOffset), and a deliberate
// move back from a client still lands, since it arrives after what it replaces.
type commitOrder struct {
	mu   sync.Mutex
	last map[offsetKey]commitOrigin // per queue: the latest-arriving request that committed it
}

// commitOrigin names a commit's request: its connection and its arrival on that connection.
// The zero value is a commit no client request carried (a reset, POP, the transaction
// checker): it is never dropped and does not order later commits.
type commitOrigin struct {
	conn, arrival uint64
}

// originOf is the origin of a commit carried by req on conn.
func originOf(conn *remoting.Conn, req *remoting.Command) commitOrigin {
	if conn == nil || req == nil || req.Arrival() == 0 {
		return commitOrigin{}
	}
	return commitOrigin{conn: conn.ID(), arrival: req.Arrival()}
}

// apply runs commit for k under the order's lock, unless a request of o's connection that
// arrived after o already committed k; it reports whether commit ran. Commits take the lock
// only for an in-memory table update or a batcher enqueue, never for I/O.
func (co *commitOrder) apply(k offsetKey, o commitOrigin, commit func()) bool {
	co.mu.Lock()
	defer co.mu.Unlock()
	if o.conn != 0 {
		if prev, ok := co.last[k]; ok && prev.conn == o.conn && prev.arrival > o.arrival {
			return false
		}
		if co.last == nil {
			co.last = map[offsetKey]commitOrigin{}
		}
		co.last[k] = o
	}
	commit()
	return true
}
