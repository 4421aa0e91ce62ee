package lazyfs

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
)

const (
	writers      = 8
	opsPerWriter = 150
	maxFileSize  = 256 << 10
)

// writerModel is what one writer expects its file to hold.
type writerModel struct {
	name   string
	live   []byte // content as written
	synced []byte // content at the last fsync
}

// runWriter does random writes, truncates, reads and fsyncs on its own
// file and checks every read against its model.
func runWriter(l *lab, id int, m *writerModel) error {
	rng := rand.New(rand.NewPCG(uint64(id), 99))
	f, err := os.OpenFile(l.path(m.name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for op := range opsPerWriter {
		switch r := rng.IntN(10); {
		case r < 6:
			off := rng.IntN(maxFileSize)
			data := pattern(1+rng.IntN(10<<10), byte(op))
			if _, err := f.WriteAt(data, int64(off)); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			if end := off + len(data); end > len(m.live) {
				m.live = append(m.live, make([]byte, end-len(m.live))...)
			}
			copy(m.live[off:], data)
		case r < 7:
			size := rng.IntN(maxFileSize)
			if err := f.Truncate(int64(size)); err != nil {
				return fmt.Errorf("truncate: %w", err)
			}
			m.live = resized(m.live, size)
		case r < 9:
			if err := checkRead(f, m.live, rng); err != nil {
				return err
			}
		default:
			if err := f.Sync(); err != nil {
				return fmt.Errorf("fsync: %w", err)
			}
			m.synced = bytes.Clone(m.live)
		}
	}
	return nil
}

func resized(b []byte, size int) []byte {
	if size <= len(b) {
		return b[:size]
	}
	return append(b, make([]byte, size-len(b))...)
}

// checkRead reads a random range and compares it with the model.
func checkRead(f *os.File, want []byte, rng *rand.Rand) error {
	off := rng.IntN(len(want) + 1)
	buf := make([]byte, rng.IntN(64<<10))
	n, err := f.ReadAt(buf, int64(off))
	if err != nil && n != min(len(buf), len(want)-off) {
		return fmt.Errorf("read at %d: %d bytes, %w", off, n, err)
	}
	if !bytes.Equal(buf[:n], want[off:off+n]) {
		return fmt.Errorf("read at %d: content differs at %d", off, firstDiff(buf[:n], want[off:off+n]))
	}
	return nil
}

func TestConcurrentWriters(t *testing.T) {
	l := newLab(t)
	models := make([]*writerModel, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		models[i] = &writerModel{name: fmt.Sprintf("f%d", i)}
		wg.Go(func() { errs[i] = runWriter(l, i, models[i]) })
	}
	// A reader of attributes and listings runs alongside.
	stop := make(chan struct{})
	var statWG sync.WaitGroup
	statWG.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				_, _ = os.ReadDir(l.mnt)
				_ = l.fs.Unsynced()
			}
		}
	})
	wg.Wait()
	close(stop)
	statWG.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	for _, m := range models {
		wantContent(t, l.path(m.name), m.live)
	}
	l.fs.PowerLoss(0, nil)
	l.remount()
	for _, m := range models {
		wantContent(t, l.path(m.name), m.synced)
	}
}
