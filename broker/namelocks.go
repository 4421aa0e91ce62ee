package broker

import (
	"hash/fnv"
	"sync"
)

// nameLocks serialises the DLedger metadata proposals for one topic or one group (check the
// table, propose, wait for the apply), while proposals for different names go to Raft
// concurrently and share its entries: with one lock for every proposal each creation waited for
// the previous one's commit (about 350 topics/s on a three-node group); creations of different
// topics now overlap. Names hash onto a fixed set of mutexes, so two names may share one, which
// only serialises them. The zero value is ready to use.
type nameLocks struct {
	mu [64]sync.Mutex
}

// lock locks the mutex of kind ("topic" or "group") and name and returns its unlock.
func (l *nameLocks) lock(kind, name string) (unlock func()) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(kind))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(name))
	m := &l.mu[h.Sum32()%uint32(len(l.mu))]
	m.Lock()
	return m.Unlock
}
