package storage

import (
	"strings"
	"testing"
	"time"

	"rocketraft/storage/vfs"
)

// The statuses that only appear while files are being removed.
func TestGetMessagesRemovedData(t *testing.T) {
	fs := vfs.NewMemFS()
	cfg := testConfig(fs)
	s := openT(t, cfg)
	defer s.Close()
	for i := 0; i < 150; i++ {
		appendT(t, s, rec(t, "G", 0, strings.Repeat("b", 1500), "", ""))
	}
	// commitlog files deleted, consume queue not cleaned yet: like RocketMQ, a pull skips
	// removed units and returns what follows within the consume-queue file
	for i := 0; i < 3; i++ {
		if err := s.cl.segs.removeSegment(s.cl.segs.snapshot()[0]); err != nil {
			t.Fatal(err)
		}
	}
	r := s.GetMessages("G", 0, 0, 8, 0, nil)
	if r.Status != MessageWasRemoving || r.NextBeginOffset != 100 {
		t.Fatalf("removed data: %v next %d", r.Status, r.NextBeginOffset)
	}
	r = s.GetMessages("G", 0, 100, 8, 0, nil)
	if r.Status != Found || len(r.Records) != 8 {
		t.Fatalf("after removed data: %v %d", r.Status, len(r.Records))
	}
	// consume-queue file 0 gone while min offset still points into it
	q := s.queueByName("G", 0)
	if err := q.segs.removeSegment(q.segs.snapshot()[0]); err != nil {
		t.Fatal(err)
	}
	r = s.GetMessages("G", 0, 5, 8, 0, nil)
	if r.Status != OffsetFoundNull || r.NextBeginOffset != 100 {
		t.Fatalf("missing cq file: %v next %d", r.Status, r.NextBeginOffset)
	}
	if r := s.GetMessages("G", 0, 100, 8, 0, nil); r.Status != Found || len(r.Records) != 8 || len(r.Body) != r.Bytes {
		t.Fatalf("after the hole: %v %d", r.Status, len(r.Records))
	}
}

func TestStats(t *testing.T) {
	s := openT(t, testConfig(vfs.NewMemFS()))
	defer s.Close()
	appendT(t, s, rec(t, "S", 0, "x", "", ""), rec(t, "S", 1, "y", "", ""))
	st := s.Stats()
	if st.PutMessageTimesTotal != 2 || st.CommitLogMaxOffset != s.CommitLogMaxOffset() || st.Queues != 2 || st.CommitLogFlushed != st.CommitLogMaxOffset || st.DiskFull {
		t.Fatalf("stats %+v", st)
	}
	// /status shows the limit beside the usage (DiskRatio, DiskFull).
	if st.DiskMaxUsedSpaceRatio != testConfig(vfs.NewMemFS()).DiskMaxUsedSpaceRatio || st.DiskMaxUsedSpaceRatio == 0 {
		t.Fatalf("DiskMaxUsedSpaceRatio %d", st.DiskMaxUsedSpaceRatio)
	}
}

func TestConfigValidation(t *testing.T) {
	for key, mod := range map[string]func(c *Config){
		"storePathRootDir":          func(c *Config) { c.StorePathRootDir = "" },
		"mapedFileSizeConsumeQueue": func(c *Config) { c.MappedFileSizeConsumeQueue = 1001 },
		"flushDiskType":             func(c *Config) { c.FlushDiskType = "SOMETIMES" },
		"deleteWhen":                func(c *Config) { c.DeleteWhen = "04;25" },
		"diskMaxUsedSpaceRatio":     func(c *Config) { c.DiskMaxUsedSpaceRatio = 100 },
		"syncFlushTimeout":          func(c *Config) { c.SyncFlushTimeout = 0 },
	} {
		cfg := DefaultConfig("/x")
		mod(&cfg)
		if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v", key, err)
		}
	}
	cfg := DefaultConfig("/x")
	if err := cfg.validate(); err != nil || cfg.FS == nil || cfg.Logger == nil {
		t.Fatalf("defaults: %v", err)
	}
	if cfg.MappedFileSizeCommitLog != 1<<30 || cfg.MappedFileSizeConsumeQueue != 6000000 || cfg.SyncFlushTimeout != 5*time.Second || cfg.FileReservedTime != 72 || cfg.MaxHashSlotNum != 5000000 || cfg.MaxIndexNum != 20000000 {
		t.Fatalf("defaults differ from RocketMQ: %+v", cfg)
	}
	hours, _ := parseDeleteWhen("04;10")
	if !hours[4] || !hours[10] || len(hours) != 2 {
		t.Fatalf("deleteWhen %v", hours)
	}
}

func TestDirtyLen(t *testing.T) {
	b := make([]byte, 3*4096+100)
	if dirtyLen(b) != 0 {
		t.Fatal("zeros")
	}
	b[5000] = 1
	if dirtyLen(b) != 5001 {
		t.Fatal(dirtyLen(b))
	}
	b[len(b)-1] = 1
	if dirtyLen(b) != len(b) {
		t.Fatal(dirtyLen(b))
	}
}
