package fsm

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"rocketraft/storage/vfs"
)

// raftStores are a node's Raft log and snapshot stores, in memory; they survive "restarts".
type raftStores struct {
	logs  *raft.InmemStore
	snaps *raft.InmemSnapshotStore
}

func startRaft(t *testing.T, st raftStores, f *FSM, bootstrap bool) *raft.Raft {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = "n0"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.SnapshotThreshold = 1 << 30 // snapshots only when asked
	conf.SnapshotInterval = time.Hour
	conf.Logger = hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	addr, trans := raft.NewInmemTransport("n0")
	r, err := raft.NewRaft(conf, f, st.logs, st.logs, st.snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	if bootstrap {
		cfg := raft.Configuration{Servers: []raft.Server{{ID: "n0", Address: addr}}}
		if err := r.BootstrapCluster(cfg).Error(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.State() != raft.Leader {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r
}

func propose(t *testing.T, r *raft.Raft, logs []*raft.Log) {
	t.Helper()
	for _, l := range logs {
		fut := r.Apply(l.Data, 5*time.Second)
		if err := fut.Error(); err != nil {
			t.Fatal(err)
		}
		if res, ok := fut.Response().(*ApplyResult); ok {
			for _, a := range res.Appends {
				if a.Err != nil {
					t.Fatal(a.Err)
				}
			}
		}
	}
}

// TestWithRaftRestart drives the FSM through real hashicorp/raft: entries, a snapshot, more
// entries, a kill (every write kept, marker behind the store), and a restart with the same
// Raft stores. Raft restores its snapshot at start (the FSM keeps its store, restores only the
// metadata) and replays the log after it; the commitlog and metadata end as on a node that
// never crashed, with every entry applied once.
func TestWithRaftRestart(t *testing.T) {
	logs := workload(t, 120) // entry data only; raft assigns indexes (plus its own entries)
	refFS, refMeta := vfs.NewMemFS(), newFakeMeta()
	ref := newFSM(t, refFS, refMeta)
	defer ref.Close()
	refStores := raftStores{raft.NewInmemStore(), raft.NewInmemSnapshotStore()}
	rr := startRaft(t, refStores, ref, true)
	propose(t, rr, logs)
	if err := rr.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}

	fs, meta := vfs.NewMemFS(), newFakeMeta()
	f := newFSM(t, fs, meta)
	st := raftStores{raft.NewInmemStore(), raft.NewInmemSnapshotStore()}
	r := startRaft(t, st, f, true)
	propose(t, r, logs[:50])
	if err := r.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	propose(t, r, logs[50:90])
	marker, err := fs.ReadFile(root + "/" + markerName)
	if err != nil {
		t.Fatal(err)
	}
	propose(t, r, logs[90:95]) // applied to the store, but the marker will be put back
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashKeeping(func(string, int) bool { return true })
	if err := crashed.WriteFile(root+"/"+markerName, marker); err != nil {
		t.Fatal(err)
	}
	f.Close()

	meta = newFakeMeta()
	g := newFSM(t, crashed, meta)
	defer g.Close()
	r = startRaft(t, st, g, false)
	defer r.Shutdown()
	propose(t, r, logs[95:])
	if err := r.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	sameImage(t, "raft restart", commitlogImage(t, refFS), commitlogImage(t, crashed))
	if a, b := queueState(ref), queueState(g); a != b {
		t.Fatalf("queues differ:\n%s\n%s", a, b)
	}
	if refMeta.dump() != meta.dump() {
		t.Fatalf("metadata differs (applied twice or lost):\n%s\n%s", refMeta.dump(), meta.dump())
	}
}
