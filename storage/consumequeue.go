package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"rocketraft/storage/vfs"
)

// cqUnit is one consume-queue unit (§6.3).
type cqUnit struct {
	phys int64
	size int32
	tags int64
}

// blankUnitSize marks a filler unit at the front of a queue that starts past 0.
const blankUnitSize = math.MaxInt32

// consumeQueue is the index of one (topic, queueId): unit i at byte i*20. The appender (holding
// Store.mu) is the only writer; it writes a unit before publishing max, so readers may read
// any unit below max without further locking than the segment list's.
type consumeQueue struct {
	topic string
	qid   int32
	segs  *segmentList
	// max is the next logical offset to assign (= units written).
	max atomic.Int64
	// min is the first logical offset whose record is still in the commitlog.
	min atomic.Int64
	// flushed is the number of units known durable (flusher only).
	flushed int64
	// next is the next logical offset to assign during append call gen, whose units are
	// published only after its bytes are written (appender only, under Store.mu).
	next int64
	gen  uint64
}

// assign returns the next logical offset for a record of append call gen: max, plus the units
// already assigned in the same call.
func (q *consumeQueue) assign(gen uint64) int64 {
	if q.gen != gen {
		q.gen, q.next = gen, q.max.Load()
	}
	o := q.next
	q.next++
	return o
}

func consumeQueueDir(root, topic string, qid int32) string {
	return filepath.Join(root, "consumequeue", topic, strconv.Itoa(int(qid)))
}

func openConsumeQueue(fsys vfs.FS, root, topic string, qid int32, fileSize int64) (*consumeQueue, error) {
	segs, err := openSegmentList(fsys, consumeQueueDir(root, topic, qid), fileSize)
	if err != nil {
		return nil, fmt.Errorf("consume queue %s-%d: %w", topic, qid, err)
	}
	return &consumeQueue{topic: topic, qid: qid, segs: segs}, nil
}

func (q *consumeQueue) unitsPerFile() int64 { return q.segs.size / ConsumeQueueUnitSize }

// ensure maps the segment that will hold unit i, creating it if needed.
func (q *consumeQueue) ensure(i int64) error {
	off := i * ConsumeQueueUnitSize
	q.segs.mu.RLock()
	s := q.segs.find(off)
	q.segs.mu.RUnlock()
	if s != nil {
		return nil
	}
	if _, err := q.segs.create(off - off%q.segs.size); err != nil {
		return fmt.Errorf("consume queue %s-%d: %w", q.topic, q.qid, err)
	}
	return nil
}

// put writes unit i (whose segment ensure has mapped) and publishes max = i+1.
func (q *consumeQueue) put(i int64, u cqUnit) {
	off := i * ConsumeQueueUnitSize
	q.segs.mu.RLock()
	s := q.segs.find(off)
	p := off - s.start
	be := binary.BigEndian
	be.PutUint64(s.b[p:], uint64(u.phys))
	be.PutUint32(s.b[p+8:], uint32(u.size))
	be.PutUint64(s.b[p+12:], uint64(u.tags))
	q.segs.mu.RUnlock()
	q.max.Store(i + 1)
}

// units reads up to n units from logical offset i, stopping at max and at the end of the
// segment holding i. ok is false when no segment holds i (removed, or a hole).
func (q *consumeQueue) units(i int64, n int, buf []cqUnit) ([]cqUnit, bool) {
	buf = buf[:0]
	end := q.max.Load()
	off := i * ConsumeQueueUnitSize
	q.segs.mu.RLock()
	defer q.segs.mu.RUnlock()
	s := q.segs.find(off)
	if s == nil {
		return buf, false
	}
	be := binary.BigEndian
	for ; len(buf) < n && i < end && off < s.start+q.segs.size; i, off = i+1, off+ConsumeQueueUnitSize {
		p := off - s.start
		buf = append(buf, cqUnit{
			phys: int64(be.Uint64(s.b[p:])),
			size: int32(be.Uint32(s.b[p+8:])),
			tags: int64(be.Uint64(s.b[p+12:])),
		})
	}
	return buf, true
}

// unit reads one unit below max.
func (q *consumeQueue) unit(i int64) (cqUnit, bool) {
	var one [1]cqUnit
	us, ok := q.units(i, 1, one[:0])
	if !ok || len(us) == 0 {
		return cqUnit{}, false
	}
	return us[0], true
}

// nextFileOffset is the first logical offset of the segment after the one holding i.
func (q *consumeQueue) nextFileOffset(i int64) int64 {
	per := q.unitsPerFile()
	return (i/per + 1) * per
}

// sync makes the units written since the last sync durable.
func (q *consumeQueue) sync(upTo int64) error {
	if upTo <= q.flushed {
		return nil
	}
	if err := q.segs.sync(q.flushed*ConsumeQueueUnitSize, upTo*ConsumeQueueUnitSize); err != nil {
		return fmt.Errorf("consume queue %s-%d: %w", q.topic, q.qid, err)
	}
	q.flushed = upTo
	return nil
}

// recomputeMin sets min to the first unit whose record is at or after clMin (commitlog min).
func (q *consumeQueue) recomputeMin(clMin int64) {
	max := q.max.Load()
	lo := q.min.Load()
	if first := q.segs.snapshot(); len(first) > 0 {
		lo = maxI64(lo, first[0].start/ConsumeQueueUnitSize)
	}
	// units are in commitlog order, so binary search the first unit with phys >= clMin
	hi := max
	for lo < hi {
		mid := lo + (hi-lo)/2
		u, ok := q.unit(mid)
		if !ok || u.size == blankUnitSize || u.phys < clMin {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	q.min.Store(lo)
}

func maxI64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
