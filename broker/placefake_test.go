package broker

import (
	"rocketraft/metrics"
	"rocketraft/storage"
)

// placeFake is a place with fixed answers for the types that only ask a place about the node
// (registrar, statusPages, the metrics collector); a method it does not override panics through
// the nil embedded place, so a test notices when a type asks for more than it should.
type placeFake struct {
	place
	registersNow bool
	forwards     bool
	id           int64
	role         string
	// store and storeErr are acquire's answer; rp is raft's (nil: classic mode).
	store    *storage.Store
	storeErr error
	rp       *raftPlace
	apply    *metrics.Histogram
}

// The answers about the node, as set.
func (p *placeFake) registers() bool      { return p.registersNow }
func (p *placeFake) forwardsWrites() bool { return p.forwards }
func (p *placeFake) brokerID() int64      { return p.id }
func (p *placeFake) roleName() string     { return p.role }

// acquire gives the store (nothing to release) or storeErr.
func (p *placeFake) acquire() (*storage.Store, func(), error) {
	if p.storeErr != nil {
		return nil, nil, p.storeErr
	}
	return p.store, noRelease, nil
}

// raft is rp, or errNotRaft for a classic node.
func (p *placeFake) raft() (*raftPlace, error) {
	if p.rp == nil {
		return nil, errNotRaft
	}
	return p.rp, nil
}

// newApplyHistogram is apply (nil: appends are not timed).
func (p *placeFake) newApplyHistogram() *metrics.Histogram { return p.apply }
