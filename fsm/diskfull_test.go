package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"rocketraft/storage/vfs"
)

// TestApplyIgnoresUsageRatio: a replica whose disk is over diskMaxUsedSpaceRatio (the leader
// decides that refusal before proposing) applies every committed entry, and ends byte-identical
// to a replica with room.
func TestApplyIgnoresUsageRatio(t *testing.T) {
	logs := workload(t, 120)
	fullFS, okFS := vfs.NewMemFS(), vfs.NewMemFS()
	fullFS.SetUsage(&vfs.Usage{Total: 100, Used: 97}) // over the default 75 %
	full, ok := newFSM(t, fullFS, nil), newFSM(t, okFS, nil)
	defer full.Close()
	defer ok.Close()
	st, release, err := full.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	err = st.CheckDiskSpace(1)
	release()
	if err == nil {
		t.Fatal("store does not consider itself over the ratio")
	}
	for i, l := range logs {
		ra, rb := full.Apply(l), ok.Apply(l)
		if res, isMsg := ra.(*ApplyResult); isMsg {
			for j, a := range res.Appends {
				if a.Err != nil {
					t.Fatalf("entry %d append %d refused on the full replica: %v", i+1, j, a.Err)
				}
			}
			if rbm := rb.(*ApplyResult); len(rbm.Appends) != len(res.Appends) {
				t.Fatalf("entry %d: results differ", i+1)
			}
		}
	}
	if full.AppliedIndex() != 120 {
		t.Fatalf("applied %d", full.AppliedIndex())
	}
	sameImage(t, "full vs ok replica", commitlogImage(t, okFS), commitlogImage(t, fullFS))
	if queueState(full) != queueState(ok) {
		t.Fatal("queues differ")
	}
}

// TestApplyWriteErrorStops: a real write failure in Apply (no space to create a file, an I/O
// error) stops the replica with a panic before the applied index or the marker move past the
// entry; the part of the entry written before the failure is truncated away at restart, and the
// replayed entry then applies exactly as on a healthy replica.
func TestApplyWriteErrorStops(t *testing.T) {
	for _, c := range []struct {
		name   string
		inject func(*vfs.MemFS)
		want   string
	}{
		{"ENOSPC", func(fs *vfs.MemFS) { fs.SetFull(true) }, "no space left"},
		{"EIO", func(fs *vfs.MemFS) { fs.FailAll(vfs.OpCreate) }, "injected I/O error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := workload(t, 40)
			// entry 41: one append to an existing queue, then one to a queue never seen, whose
			// consume-queue file must be created
			next := &raft.Log{Index: 41, Term: 9, Type: raft.LogCommand, Data: EncodeMessages([][][]byte{
				{rec(t, "A", 0, "before the failure", 1_700_000_001_000)},
				{rec(t, "Fresh", 3, "needs a new file", 1_700_000_001_000)},
			})}
			fs := vfs.NewMemFS()
			f := newFSM(t, fs, nil)
			applyAll(f, logs)
			before := commitlogImage(t, fs)
			c.inject(fs)
			var msg string
			func() {
				defer func() { msg = fmt.Sprint(recover()) }()
				f.Apply(next)
			}()
			if !strings.Contains(msg, "raft entry 41") || !strings.Contains(msg, "append 1") || !strings.Contains(msg, c.want) {
				t.Fatalf("apply did not stop loudly: panic %q", msg)
			}
			if partial := commitlogImage(t, fs); bytesEqualImages(before, partial) {
				t.Fatal("the append before the failure was not written; the test proves nothing about truncation")
			}
			if f.AppliedIndex() != 40 {
				t.Fatalf("applied index moved to %d past a failed entry", f.AppliedIndex())
			}
			fs.ClearFaults()
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			// restart: the marker still says 40, so 41 is applied again, from the same state
			g := newFSM(t, fs, nil)
			defer g.Close()
			if g.AppliedIndex() != 40 {
				t.Fatalf("marker moved to %d past a failed entry", g.AppliedIndex())
			}
			sameImage(t, "truncated to the marker", before, commitlogImage(t, fs))
			res := g.Apply(next).(*ApplyResult)
			ref := newFSM(t, vfs.NewMemFS(), nil)
			defer ref.Close()
			applyAll(ref, logs)
			want := ref.Apply(next).(*ApplyResult)
			if len(res.Appends) != 2 || res.Appends[1].Err != nil || res.Appends[0].Results[0] != want.Appends[0].Results[0] {
				t.Fatalf("replayed entry: %+v, want %+v", res.Appends, want.Appends)
			}
			if queueState(g) != queueState(ref) {
				t.Fatalf("queues after replay:\n%s\nwant\n%s", queueState(g), queueState(ref))
			}
		})
	}
}

func bytesEqualImages(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for n, x := range a {
		if !bytes.Equal(x, b[n]) {
			return false
		}
	}
	return true
}
