package integration

// An offline reader of a stopped broker's data directory, independent of storage/ (written
// concurrently): it checks that the consume queues and the commitlog agree, in both
// directions. Formats per protocol notes §6.2-6.3:
//
//	commitlog/<20-digit start offset>           records back to back (§5.4); a record never
//	                                            spans files; 8-byte blank marker
//	                                            (remaining int32, 0xCBD43194) before a roll
//	consumequeue/<topic>/<queueId>/<20-digit start byte offset>
//	                                            20-byte units: commitlog offset int64,
//	                                            size int32, tags code int64

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// clFile is one commitlog segment read into memory.
type clFile struct {
	start int64
	data  []byte
}

type commitLog struct{ files []clFile }

// readSegments lists a directory of files named by 20-digit start offsets, in offset order.
func readSegments(dir string) ([]clFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []clFile
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		if len(e.Name()) != 20 {
			return nil, fmt.Errorf("%s: file %q is not named by a 20-digit offset", dir, e.Name())
		}
		start, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: file %q is not named by a 20-digit offset", dir, e.Name())
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, clFile{start, data})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out, nil
}

func openCommitLog(dir string) (*commitLog, error) {
	files, err := readSegments(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no commitlog files", dir)
	}
	for i := 1; i < len(files); i++ {
		prev := files[i-1]
		if prev.start+int64(len(prev.data)) != files[i].start {
			return nil, fmt.Errorf("commitlog file %020d (%d bytes) is not followed by %020d but by %020d",
				prev.start, len(prev.data), prev.start+int64(len(prev.data)), files[i].start)
		}
	}
	return &commitLog{files}, nil
}

// record decodes the record at commitlog offset off.
func (cl *commitLog) record(off int64) (*record, error) {
	for _, f := range cl.files {
		if off >= f.start && off < f.start+int64(len(f.data)) {
			r, err := parseRecord(f.data[off-f.start:])
			if err != nil {
				return nil, fmt.Errorf("commitlog offset %d: %w", off, err)
			}
			return r, nil
		}
	}
	return nil, fmt.Errorf("commitlog offset %d is outside every commitlog file", off)
}

// walk calls f for every record in log order. It stops at the end of the written data (a
// zero word where a record would start); any data after that end is an error.
func (cl *commitLog) walk(f func(off int64, r *record) error) error {
	for i, file := range cl.files {
		pos := 0
		for pos+8 <= len(file.data) {
			size := int32(binary.BigEndian.Uint32(file.data[pos:]))
			magic := binary.BigEndian.Uint32(file.data[pos+4:])
			off := file.start + int64(pos)
			if magic == magicBlank {
				break // rest of this file unused; continue with the next file
			}
			if magic != magicV1 && magic != magicV2 {
				if size != 0 || magic != 0 {
					return fmt.Errorf("commitlog offset %d: neither a record nor a blank marker nor zero (size %d, magic %#x)", off, size, magic)
				}
				for _, later := range cl.files[i+1:] {
					if len(later.data) >= 8 && binary.BigEndian.Uint64(later.data) != 0 {
						return fmt.Errorf("commitlog data ends at offset %d but file %020d holds data", off, later.start)
					}
				}
				return nil
			}
			r, err := parseRecord(file.data[pos:])
			if err != nil {
				return fmt.Errorf("commitlog offset %d: %w", off, err)
			}
			if r.PhysicalOffset != off {
				return fmt.Errorf("commitlog offset %d: record says PHYSICALOFFSET %d", off, r.PhysicalOffset)
			}
			if err := f(off, r); err != nil {
				return err
			}
			pos += int(r.TotalSize)
		}
	}
	return nil
}

// cqUnit is one consume-queue entry.
type cqUnit struct {
	phy  int64
	size int32
	tags int64
}

func (u cqUnit) blank() bool { return u.phy == 0 && u.size == 0x7FFFFFFF && u.tags == 0 }

// readConsumeQueue returns the units of one queue by logical offset, up to the first empty
// unit.
func readConsumeQueue(dir string) ([]cqUnit, error) {
	files, err := readSegments(dir)
	if err != nil {
		return nil, err
	}
	var units []cqUnit
	for _, f := range files {
		if f.start%20 != 0 || f.start != int64(len(units))*20 {
			return units, fmt.Errorf("%s: file %020d does not continue at unit %d", dir, f.start, len(units))
		}
		for p := 0; p+20 <= len(f.data); p += 20 {
			u := cqUnit{
				phy:  int64(binary.BigEndian.Uint64(f.data[p:])),
				size: int32(binary.BigEndian.Uint32(f.data[p+8:])),
				tags: int64(binary.BigEndian.Uint64(f.data[p+12:])),
			}
			if u.size <= 0 {
				return units, nil
			}
			units = append(units, u)
		}
	}
	return units, nil
}

// checkStore verifies, for topic, that every consume-queue unit points at a commitlog record
// of that topic, queue and queue offset with the unit's size and tags code (and a correct
// body CRC), and that every commitlog record of the topic (except prepared/rolled-back
// transaction halves) is pointed at by its unit. It returns the number of units per queue
// and the problems found (at most 20 listed).
func checkStore(root, topic string) (map[int]int, []string) {
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		} else if len(problems) == 20 {
			problems = append(problems, "... (more problems not listed)")
		}
	}
	cl, err := openCommitLog(filepath.Join(root, "commitlog"))
	if err != nil {
		return nil, []string{err.Error()}
	}
	qdirs, err := os.ReadDir(filepath.Join(root, "consumequeue", topic))
	if err != nil {
		return nil, []string{fmt.Sprintf("consume queues of %s: %v", topic, err)}
	}
	cq := map[int][]cqUnit{}
	for _, d := range qdirs {
		q, err := strconv.Atoi(d.Name())
		if err != nil || !d.IsDir() {
			report("unexpected entry %q in consumequeue/%s", d.Name(), topic)
			continue
		}
		units, err := readConsumeQueue(filepath.Join(root, "consumequeue", topic, d.Name()))
		if err != nil {
			report("%v", err)
		}
		cq[q] = units
		for i, u := range units {
			if u.blank() {
				report("queue %d unit %d is a blank filler in a queue that starts at 0", q, i)
				continue
			}
			r, err := cl.record(u.phy)
			if err != nil {
				report("queue %d unit %d -> %v", q, i, err)
				continue
			}
			if r.TotalSize != u.size || r.Topic != topic || int(r.QueueID) != q || r.QueueOffset != int64(i) {
				report("queue %d unit %d (offset %d, size %d) points at a record of %s/%d offset %d size %d",
					q, i, u.phy, u.size, r.Topic, r.QueueID, r.QueueOffset, r.TotalSize)
			}
			var want int64
			if tag := r.Properties["TAGS"]; tag != "" {
				want = int64(javaHash(tag))
			}
			if u.tags != want {
				report("queue %d unit %d: tags code %d, want %d (Java hashCode of %q)", q, i, u.tags, want, r.Properties["TAGS"])
			}
			if r.BodyCRC != bodyCRC(r.Body) {
				report("commitlog offset %d: BODYCRC %d, want %d", u.phy, r.BodyCRC, bodyCRC(r.Body))
			}
		}
	}
	records := 0
	err = cl.walk(func(off int64, r *record) error {
		if r.Topic != topic {
			return nil
		}
		if tx := r.SysFlag & 0xC; tx == 0x4 || tx == 0xC {
			return nil // prepared or rolled back: not dispatched
		}
		records++
		units := cq[int(r.QueueID)]
		if r.QueueOffset < 0 || r.QueueOffset >= int64(len(units)) || units[r.QueueOffset].phy != off {
			report("commitlog record at %d (%s/%d offset %d) is not in the consume queue (queue has %d units)",
				off, topic, r.QueueID, r.QueueOffset, len(units))
		}
		return nil
	})
	if err != nil {
		report("walking the commitlog: %v", err)
	}
	counts := map[int]int{}
	total := 0
	for q, u := range cq {
		counts[q] = len(u)
		total += len(u)
	}
	if total != records {
		report("%d consume-queue units but %d commitlog records of %s", total, records, topic)
	}
	return counts, problems
}
