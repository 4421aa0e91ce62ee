package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	"rocketraft/message"
	"rocketraft/storage/vfs"
)

// A replica's apply of a send reads each record's properties once (in the store's append).
func TestApplyScansPropertiesOnce(t *testing.T) {
	f := newFSM(t, vfs.NewMemFS(), nil)
	defer f.Close()
	ts := int64(1_700_000_000_000)
	f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: EncodeMessages([][][]byte{{rec(t, "A", 0, "warm", ts)}})})
	before := message.PropertyScans()
	f.Apply(&raft.Log{Index: 2, Term: 1, Type: raft.LogCommand, Data: EncodeMessages([][][]byte{{rec(t, "A", 0, "one", ts+1)}})})
	if n := message.PropertyScans() - before; n != 1 {
		t.Fatalf("applying one plain send scanned its properties %d times, want 1", n)
	}
}
