package storage

import (
	"testing"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// The append path reads each record's properties once (tags code, index keys, WAIT), for
// Append and for the replicated batch alike.
func TestAppendScansPropertiesOnce(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	r := rec(t, "T", 0, "body", "tg", "k1 k2")
	appendT(t, s, r) // creates the queue and index files outside the count
	before := message.PropertyScans()
	appendT(t, s, r)
	if n := message.PropertyScans() - before; n != 1 {
		t.Fatalf("Append of one record scanned its properties %d times, want 1", n)
	}
	before = message.PropertyScans()
	if _, err := s.AppendReplicatedBatch([][][]byte{{r, r}, {r}}); err != nil {
		t.Fatal(err)
	}
	if n := message.PropertyScans() - before; n != 3 {
		t.Fatalf("a replicated batch of 3 records scanned properties %d times, want 3", n)
	}
}
