package dledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hashicorp/raft"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBatcherConcurrentSubmits(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	b := NewBatcher(lead, testCodec, BatchOptions{})
	defer b.Close()
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			item := fmt.Sprintf("m%d", i)
			got, err := b.Submit(context.Background(), item)
			if err != nil || got != "ok:"+item {
				errs <- fmt.Errorf("submit %s = %q, %v", item, got, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := b.Stats()
	t.Logf("%d items in %d entries", st.Items, st.Entries)
	if st.Items != n || st.Entries >= n/2 {
		t.Fatalf("stats %+v: want %d items grouped into far fewer entries", st, n)
	}
	// Every replica applied the same entries.
	c.sameLogs(electionBound, c.fsms[lead.ID()].(*testFSM).log())
}

func TestBatcherBounds(t *testing.T) {
	c := newCluster(t, 1, nil, nil)
	lead := c.leader(electionBound)
	b := NewBatcher(lead, testCodec, BatchOptions{MaxItems: 7, MaxBytes: 64, MaxInFlight: 2, Linger: time.Millisecond})
	defer b.Close()
	var wg sync.WaitGroup
	for i := 0; i < 300; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			item := fmt.Sprintf("item-%03d", i) // 9 bytes + 3 = 12 per item: at most 5 fit in 64
			if i == 0 {
				item = string(make([]byte, 100)) // larger than MaxBytes travels alone
			}
			if _, err := b.Submit(context.Background(), item); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, cmd := range c.fsms["n0"].(*testFSM).log() {
		if cmd[0] != 'B' {
			continue
		}
		var items []string
		if err := jsonUnmarshal(cmd[1:], &items); err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, it := range items {
			size += testCodec.Size(it)
		}
		if len(items) > 7 || (len(items) > 1 && size > 64) {
			t.Fatalf("entry of %d items, %d bytes breaks the bounds", len(items), size)
		}
	}
}

func TestBatcherErrorsReachEveryCaller(t *testing.T) {
	fsm := &testFSM{gate: make(chan struct{})}
	c := newCluster(t, 1, nil, func() raft.FSM { return fsm })
	lead := c.leader(electionBound)
	b := NewBatcher(lead, testCodec, BatchOptions{MaxInFlight: 1})
	defer b.Close()

	// The "gate" entry holds the only in-flight slot until every other item is queued, so they all
	// travel in the next entry together with "poison" and "bad1".
	gateDone := make(chan error, 1)
	go func() { _, err := b.Submit(context.Background(), "gate"); gateDone <- err }()
	eventually(t, electionBound, func() error {
		if b.inflight.Load() != 1 {
			return errors.New("gate entry not in flight")
		}
		return nil
	})
	items := []string{"poison", "bad1"}
	for i := 0; i < 20; i++ {
		items = append(items, fmt.Sprintf("m%d", i))
	}
	errs := make(chan error, len(items))
	for _, it := range items {
		go func() { _, err := b.Submit(context.Background(), it); errs <- err }()
	}
	eventually(t, electionBound, func() error {
		b.mu.Lock()
		n := len(b.queue)
		b.mu.Unlock()
		if n < len(items) {
			return fmt.Errorf("%d queued", n)
		}
		return nil
	})
	close(fsm.gate)
	if err := <-gateDone; err != nil {
		t.Fatalf("gate: %v", err)
	}
	for range items {
		if err := <-errs; err == nil || err.Error() != "poisoned entry" {
			t.Errorf("caller of the poisoned entry got %v", err)
		}
	}

	// Per-item errors reach only their own caller.
	for _, it := range []string{"bad2", "m-ok"} {
		got, err := b.Submit(context.Background(), it)
		var ie itemError
		switch {
		case it == "bad2" && (!errors.As(err, &ie) || ie.item != it):
			t.Errorf("%s: %v, want its own item error", it, err)
		case it == "m-ok" && (err != nil || got != "ok:m-ok"):
			t.Errorf("%s: %q, %v", it, got, err)
		}
	}
}

func TestBatcherNotLeaderAndClose(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	b := NewBatcher(c.follower(), testCodec, BatchOptions{})
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.Submit(context.Background(), "x")
			var nle *NotLeaderError
			if !errors.As(err, &nle) || nle.LeaderAddr != lead.Addr() {
				t.Errorf("submit on follower: %v", err)
			}
		}()
	}
	wg.Wait()
	b.Close()
	b.Close()
	if _, err := b.Submit(context.Background(), "x"); !errors.Is(err, ErrShutdown) {
		t.Fatalf("submit after close: %v", err)
	}
}

func TestBatcherContextCancelled(t *testing.T) {
	c := newCluster(t, 1, nil, nil)
	lead := c.leader(electionBound)
	b := NewBatcher(lead, testCodec, BatchOptions{})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Submit(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled submit: %v", err)
	}
	if got, err := b.Submit(context.Background(), "y"); err != nil || got != "ok:y" {
		t.Fatalf("submit after a cancelled one: %q %v", got, err)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// SubmitSlot answers each item exactly once through the codec's Done, without a waiting
// goroutine: results of concurrent items, and a closed batcher (ErrShutdown, never in an entry).
func TestBatcherSubmitSlot(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	codec := testCodec
	codec.Done = func(item string, r string, err error) {
		defer wg.Done()
		if item == "late" && !errors.Is(err, ErrShutdown) || item != "late" && (err != nil || r != "ok:"+item) {
			t.Errorf("item %s answered %q, %v", item, r, err)
		}
		mu.Lock()
		got[item]++
		mu.Unlock()
	}
	b := NewBatcher(lead, codec, BatchOptions{})
	const n = 500
	wg.Add(n)
	slots := make([]Slot[string, string], n)
	for i := range n {
		b.SubmitSlot(time.Now().Add(time.Minute), fmt.Sprintf("m%d", i), &slots[i])
	}
	wg.Wait()
	wg.Add(1)
	b.Close()
	b.SubmitSlot(time.Time{}, "late", new(Slot[string, string]))
	wg.Wait()
	time.Sleep(50 * time.Millisecond) // a second answer would land here
	mu.Lock()
	defer mu.Unlock()
	for item, k := range got {
		if k != 1 {
			t.Fatalf("%s answered %d times", item, k)
		}
	}
	if len(got) != n+1 {
		t.Fatalf("%d of %d items answered", len(got), n+1)
	}
	for _, e := range c.fsms[lead.ID()].(*testFSM).log() {
		if strings.Contains(string(e), `"late"`) {
			t.Fatalf("entry %s holds an item submitted after close", e)
		}
	}
}

// An item whose deadline passes while it waits for a slot (the entry ahead cannot commit: the
// followers are gone) is answered DeadlineExceeded then, not when the entry ahead fails; the
// stuck entry's item is answered once leadership is lost.
func TestBatcherSubmitSlotDeadlineWhileQueued(t *testing.T) {
	c := newCluster(t, 3, nil, nil)
	lead := c.leader(electionBound)
	for id := range c.nodes {
		if id != lead.ID() {
			c.stop(id)
		}
	}
	stuck, queued := make(chan error, 2), make(chan error, 2)
	codec := testCodec
	codec.Done = func(item string, _ string, err error) {
		if item == "stuck" {
			stuck <- err
		} else {
			queued <- err
		}
	}
	b := NewBatcher(lead, codec, BatchOptions{MaxInFlight: 1})
	defer b.Close()
	var slots [2]Slot[string, string]
	b.SubmitSlot(time.Time{}, "stuck", &slots[0])
	time.Sleep(20 * time.Millisecond) // "stuck" is taken into the one in-flight entry
	start := time.Now()
	b.SubmitSlot(start.Add(100*time.Millisecond), "queued", &slots[1])
	select {
	case err := <-queued:
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 400*time.Millisecond {
			t.Fatalf("queued item answered %v after %v, want its deadline at 100ms", err, time.Since(start))
		}
	case <-time.After(electionBound):
		t.Fatal("an item whose deadline passed in the queue was not answered")
	}
	select {
	case err := <-stuck:
		if err == nil {
			t.Fatal("an entry without a quorum succeeded")
		}
	case <-time.After(electionBound):
		t.Fatal("the entry without a quorum was never answered")
	}
	b.Close()
	if len(queued) != 0 || len(stuck) != 0 {
		t.Fatal("a callback ran twice")
	}
}
