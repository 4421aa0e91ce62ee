package meta

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"rocketraft/protocol"
)

// With a flush interval, the first change is written at once, a burst after it is coalesced and
// on disk within the interval, and Flush writes a pending change at once.
func TestTopicsFlushInterval(t *testing.T) {
	tp, path := openTestTopics(t)
	const interval = 300 * time.Millisecond
	tp.SetFlushInterval(interval)
	onDisk := func() map[string]bool { return topicsOnDisk(t, path) }
	if err := tp.Put(protocol.NewTopicConfig("T0")); err != nil {
		t.Fatal(err)
	}
	if !onDisk()["T0"] {
		t.Fatal("the first change was not written at once")
	}
	for i := 1; i <= 200; i++ {
		if err := tp.Put(protocol.NewTopicConfig(fmt.Sprintf("T%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(interval + 2*time.Second)
	for !onDisk()["T200"] {
		if time.Now().After(deadline) {
			t.Fatal("the burst was not written within the interval")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := len(onDisk()); got != 201 {
		t.Fatalf("file holds %d topics, want 201", got)
	}
	// A change right after a write waits for the timer; Flush writes it now.
	if err := tp.Put(protocol.NewTopicConfig("Late")); err != nil {
		t.Fatal(err)
	}
	if err := tp.Flush(); err != nil {
		t.Fatal(err)
	}
	if !onDisk()["Late"] {
		t.Fatal("Flush did not write the pending change")
	}
}

func TestGroupsFlushInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscriptionGroup.json")
	g, err := OpenGroups(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.SetFlushInterval(time.Hour) // only Flush can write what follows the first change
	for i := 0; i < 100; i++ {
		if _, _, err := g.GetOrCreate(fmt.Sprintf("G%d", i), true); err != nil {
			t.Fatal(err)
		}
	}
	re, _ := OpenGroups(path, nil)
	if n := len(re.Names()); n != 1 {
		t.Fatalf("before Flush the file holds %d groups, want the first change only", n)
	}
	if err := g.Flush(); err != nil {
		t.Fatal(err)
	}
	re, _ = OpenGroups(path, nil)
	if n := len(re.Names()); n != 100 {
		t.Fatalf("after Flush the file holds %d groups, want 100", n)
	}
}

// Sync writes a coalesced change before the timer would, and every concurrent caller returns
// only once the change made before its call is on disk; with nothing pending it writes nothing.
func TestTopicsSync(t *testing.T) {
	tp, path := openTestTopics(t)
	tp.SetFlushInterval(time.Hour) // only Sync or Flush can write a coalesced change
	onDisk := func() map[string]bool { return topicsOnDisk(t, path) }
	if err := tp.Sync(); err != nil {
		t.Fatalf("Sync with nothing changed: %v", err)
	}
	if err := tp.Put(protocol.NewTopicConfig("First")); err != nil { // written at once
		t.Fatal(err)
	}
	if err := tp.Put(protocol.NewTopicConfig("Coalesced")); err != nil {
		t.Fatal(err)
	}
	if onDisk()["Coalesced"] {
		t.Fatal("the second change was written at once; the test needs it coalesced")
	}
	if err := tp.Sync(); err != nil {
		t.Fatal(err)
	}
	if !onDisk()["Coalesced"] {
		t.Fatal("Sync returned before the coalesced change was on disk")
	}

	// Concurrent creators each sync after their own change: each must find its topic on disk.
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("C%d", i)
			if err := tp.Put(protocol.NewTopicConfig(name)); err != nil {
				errs <- err
				return
			}
			if err := tp.Sync(); err != nil {
				errs <- err
				return
			}
			re, err := OpenTopics(path, nil)
			if err != nil {
				errs <- err
				return
			}
			if re.Get(name) == nil {
				errs <- fmt.Errorf("%s not on disk after its Sync", name)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Nothing pending: Sync leaves the file alone.
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := tp.Sync(); err != nil {
		t.Fatal(err)
	}
	if after, err := os.Stat(path); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("Sync with nothing pending rewrote the file (%v)", err)
	}
}

// A write slower than the interval does not turn the changes after it into one write each: they
// wait for the next coalesced write, whatever the disk's speed. (Counting the interval from a
// write's start wrote every change after a slow write at once, under the table's lock.)
func TestSaverCoalescesBehindSlowWrites(t *testing.T) {
	tp, path := openTestTopics(t)
	tp.SetFlushInterval(time.Hour)
	for i := range 20000 { // a table of some MB: each write takes longer than the interval below
		if err := tp.Put(protocol.NewTopicConfig(fmt.Sprintf("Big%05d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := tp.Flush(); err != nil {
		t.Fatal(err)
	}
	tp.SetFlushInterval(time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	before := tp.saver.saves.Load()
	const workers, each = 8, 100
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := tp.Put(protocol.NewTopicConfig(fmt.Sprintf("New%d_%d", w, i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := tp.Flush(); err != nil {
		t.Fatal(err)
	}
	saves := tp.saver.saves.Load() - before
	t.Logf("%d changes, %d writes of the table", workers*each, saves)
	if saves > workers*each/4 {
		t.Fatalf("%d changes took %d writes of the whole table: the writes were not coalesced", workers*each, saves)
	}
	re, err := OpenTopics(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(re.Names()); got != 20000+workers*each {
		t.Fatalf("file holds %d topics, want %d", got, 20000+workers*each)
	}
}

// openTestTopics opens an empty topic table in a temporary directory.
func openTestTopics(t *testing.T) (*Topics, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "topics.json")
	tp, err := OpenTopics(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tp, path
}

// topicsOnDisk is the set of topic names the file at path holds.
func topicsOnDisk(t *testing.T, path string) map[string]bool {
	t.Helper()
	re, err := OpenTopics(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, n := range re.Names() {
		m[n] = true
	}
	return m
}
