package dledger

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// doublingExpander expands a stored snapshot into its bytes twice, or fails.
type doublingExpander struct{ fail error }

func (e doublingExpander) ExpandSnapshot(rc io.ReadCloser, size int64) (io.ReadCloser, int64, error) {
	defer rc.Close()
	if e.fail != nil {
		return nil, 0, e.fail
	}
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, 0, err
	}
	return io.NopCloser(bytes.NewReader(append(b, b...))), 2 * size, nil
}

// TestExpandingSnapshots: Open hands Raft the expanded stream with its size in the metadata (what
// InstallSnapshot announces to the follower), and an expansion that fails fails the Open.
func TestExpandingSnapshots(t *testing.T) {
	store := raft.NewInmemSnapshotStore()
	sink, err := store.Create(raft.SnapshotVersionMax, 10, 2, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("stub")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	meta, rc, err := expandingSnapshots{SnapshotStore: store, fsm: doublingExpander{}}.Open(sink.ID())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "stubstub" || meta.Size != 8 || meta.Index != 10 {
		t.Fatalf("opened %q, size %d, index %d", got, meta.Size, meta.Index)
	}
	_, _, err = expandingSnapshots{SnapshotStore: store, fsm: doublingExpander{fail: errors.New("store behind")}}.Open(sink.ID())
	if err == nil || !strings.Contains(err.Error(), "store behind") {
		t.Fatalf("open with a failing expansion: %v", err)
	}
}
