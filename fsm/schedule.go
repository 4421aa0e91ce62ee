package fsm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/hashicorp/raft"

	"rocketraft/storage"
)

// KindScheduleDeliver is an entry of one step of the delay scheduler (see EncodeScheduleDeliver):
// the messages that became due, re-encoded for their real topic, and the delay level's progress
// they advance. Both take effect in one apply, so a delivery and its progress can never be
// separated by a failover or a crash. (Kind 3 is left free for another entry family.)
const KindScheduleDeliver byte = 4

// ErrScheduleStale is the outcome of a delivery entry whose From is not the level's progress
// when it is applied: another entry (an earlier leader's, or a retried proposal) already moved
// it. Nothing of the entry was applied; the proposer reads the progress again.
var ErrScheduleStale = errors.New("fsm: schedule delivery is stale: the level's progress moved")

// ScheduleApplier is an optional capability of a MetaApplier: the delay scheduler's progress
// table (delayOffset.json). It is part of the metadata tables, so SnapshotMeta and RestoreMeta
// must carry it. The FSM calls it under its lock, one call at a time.
type ScheduleApplier interface {
	// DelayOffset returns the offset level has been delivered through.
	DelayOffset(level int32) int64
	// ApplyDelayOffset sets level's progress. It must be deterministic.
	ApplyDelayOffset(level int32, offset int64)
}

// ScheduleDeliver is one delivery step of delay level Level: Records (message.EncodeRecord
// layout, store timestamp stamped by the leader) are the due messages of SCHEDULE_TOPIC_XXXX
// queue Level-1 at consume-queue offsets [From, To), each re-encoded for its real topic (or for
// another level, for a timer message not yet due). Records may be empty (skipped units).
type ScheduleDeliver struct {
	Level    int32
	From, To int64
	Records  [][]byte
}

// ScheduleResult is what Apply returns (as *ScheduleResult) for a KindScheduleDeliver entry.
// Err is ErrScheduleStale when the entry did not apply (nothing stored, progress unchanged), or
// a storage.ErrMessageIllegal outcome of the append (the progress still moved: see
// applySchedule); Results are the appended records' results otherwise.
type ScheduleResult struct {
	Results []storage.AppendResult
	Err     error
}

// scheduleHeader is kind, level, from, to, record count.
const scheduleHeader = 1 + 4 + 8 + 8 + 4

// EncodeScheduleDeliver builds one KindScheduleDeliver entry, integers big-endian:
//
//	offset  size  field
//	0       1     kind = 4
//	1       4     level (1-based)
//	5       8     from: the level's progress the step starts at
//	13      8     to: the progress after it (> from)
//	21      4     R: number of records (may be 0)
//	25      ...   R times a 4-byte length L (>= 1) and L bytes of record
//	end-4   4     CRC-32C (Castagnoli) of every byte before it
func EncodeScheduleDeliver(d *ScheduleDeliver) ([]byte, error) {
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("fsm: encode schedule delivery: %w", err)
	}
	n := scheduleHeader + 4
	for _, r := range d.Records {
		n += 4 + len(r)
	}
	b := make([]byte, 0, n)
	b = append(b, KindScheduleDeliver)
	b = binary.BigEndian.AppendUint32(b, uint32(d.Level))
	b = binary.BigEndian.AppendUint64(b, uint64(d.From))
	b = binary.BigEndian.AppendUint64(b, uint64(d.To))
	b = binary.BigEndian.AppendUint32(b, uint32(len(d.Records)))
	for _, r := range d.Records {
		b = binary.BigEndian.AppendUint32(b, uint32(len(r)))
		b = append(b, r...)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

func (d *ScheduleDeliver) validate() error {
	switch {
	case d.Level < 1:
		return fmt.Errorf("level %d < 1", d.Level)
	case d.From < 0 || d.To <= d.From:
		return fmt.Errorf("bad range [%d, %d)", d.From, d.To)
	case int64(len(d.Records)) > d.To-d.From:
		return fmt.Errorf("%d records for %d units", len(d.Records), d.To-d.From)
	}
	for i, r := range d.Records {
		if len(r) == 0 {
			return fmt.Errorf("record %d is empty", i)
		}
	}
	return nil
}

// DecodeScheduleDeliver decodes a KindScheduleDeliver entry; records are slices of data. It
// never panics and fails on any damage (CRC, lengths, trailing bytes, bad values).
func DecodeScheduleDeliver(data []byte) (*ScheduleDeliver, error) {
	if len(data) < scheduleHeader+4 || data[0] != KindScheduleDeliver {
		return nil, fmt.Errorf("%w: not a schedule delivery entry (%d bytes)", ErrMalformedEntry, len(data))
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: schedule delivery CRC mismatch", ErrMalformedEntry)
	}
	be := binary.BigEndian
	d := &ScheduleDeliver{
		Level: int32(be.Uint32(body[1:])),
		From:  int64(be.Uint64(body[5:])),
		To:    int64(be.Uint64(body[13:])),
	}
	nr := int(be.Uint32(body[21:]))
	p := body[scheduleHeader:]
	if nr > len(p)/4 {
		return nil, fmt.Errorf("%w: schedule delivery: bad record count %d", ErrMalformedEntry, nr)
	}
	d.Records = make([][]byte, nr)
	for i := range d.Records {
		if len(p) < 4 {
			return nil, fmt.Errorf("%w: schedule delivery record %d: truncated", ErrMalformedEntry, i)
		}
		n := int(be.Uint32(p))
		p = p[4:]
		if n > len(p) {
			return nil, fmt.Errorf("%w: schedule delivery record %d: bad length", ErrMalformedEntry, i)
		}
		d.Records[i], p = p[:n:n], p[n:]
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: schedule delivery: %d trailing bytes", ErrMalformedEntry, len(p))
	}
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("%w: schedule delivery: %w", ErrMalformedEntry, err)
	}
	return d, nil
}

// applySchedule applies a delivery step as one compare-and-set on the level's progress: iff the
// progress equals From, the records are appended and the progress set to To. A stale step (a
// proposal retried after an unknown outcome, an old leader's) changes nothing, so a delivery is
// never applied twice whatever the proposer does.
//
// The decision reads the progress table, whose state at this entry is the same on every replica
// and on every replay (metadata exactly once, see the package doc). The store part follows the
// marker and the table part metaThrough, as for metadata entries; metaThrough never exceeds the
// marker's index, so "table done, store not done" cannot happen and is refused loudly.
//
// An append outcome of storage.ErrMessageIllegal (which every replica meets identically) still
// moves the progress: the decision must not depend on the store, which a replay skips. The
// leader only proposes records re-encoded from stored ones and bounded well under a commitlog
// file, so this is not expected; it is logged.
func (f *FSM) applySchedule(l *raft.Log) interface{} {
	d, err := DecodeScheduleDeliver(l.Data)
	if err != nil {
		panic(fmt.Sprintf("fsm: raft entry %d (term %d): %v; a state machine must not skip an entry", l.Index, l.Term, err))
	}
	storeDone, metaDone := l.Index <= f.cur.Index, l.Index <= f.metaThrough || f.cfg.Meta == nil
	if storeDone && metaDone {
		return nil
	}
	sa, _ := f.cfg.Meta.(ScheduleApplier)
	if f.cfg.Meta != nil && sa == nil {
		panic(fmt.Sprintf("fsm: raft entry %d (term %d) is a schedule delivery, but the metadata applier %T keeps no delay progress", l.Index, l.Term, f.cfg.Meta))
	}
	res := &ScheduleResult{}
	apply := true
	if sa != nil {
		if metaDone {
			panic(fmt.Sprintf("fsm: raft entry %d (term %d): the metadata tables are past it (through %d) but the store is not (applied %d); cannot decide the schedule delivery", l.Index, l.Term, f.metaThrough, f.cur.Index))
		}
		apply = sa.DelayOffset(d.Level) == d.From
	}
	if !apply {
		res.Err = ErrScheduleStale
	} else {
		if f.entries != nil && !storeDone {
			*res = f.dispatchSchedule(l, d, true)
		} else if !storeDone && len(d.Records) > 0 {
			out := f.appendAll(l, [][][]byte{d.Records}, nil)[0]
			res.Results, res.Err = out.Results, out.Err
		}
		switch {
		case errors.Is(res.Err, storage.ErrQueueOffsetStale):
			// Not delivered, on every replica alike: the progress stays, and the step is
			// proposed again with fresh queue offsets.
		case res.Err != nil:
			f.log.Error("schedule delivery: the store refused the records; the level's progress moves past them", "index", l.Index, "level", d.Level, "from", d.From, "to", d.To, "error", res.Err)
			fallthrough
		default:
			if sa != nil {
				sa.ApplyDelayOffset(d.Level, d.To)
			}
		}
	}
	if !apply && f.entries != nil && !storeDone {
		f.dispatchSchedule(l, d, false)
	}
	if !storeDone {
		f.advance(l, true)
	}
	return res
}
