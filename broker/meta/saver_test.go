package meta

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"rocketraft/protocol"
)

// With a flush interval, the first change is written at once, a burst after it is coalesced and
// on disk within the interval, and Flush writes a pending change at once.
func TestTopicsFlushInterval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	tp, err := OpenTopics(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	const interval = 300 * time.Millisecond
	tp.SetFlushInterval(interval)
	onDisk := func() map[string]bool {
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
