package meta

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"

	"rocketraft/protocol"
)

// consumerOffset.json as Java 4.x writes it: queue ids unquoted, pretty-printed, and one key
// without the separator that must be skipped.
const javaOffsets = `{
	"offsetTable":{
		"TopicTest@group1":{0:120,1:98,3:-1},
		"%RETRY%group1@group1":{0:7},
		"broken":{0:1}
	}
}`

func TestOpenJavaOffsetsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "consumerOffset.json")
	os.WriteFile(path, []byte(javaOffsets), 0o644)
	o, err := OpenOffsets(path, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := o.Query("group1", "TopicTest", 1); !ok || off != 98 {
		t.Fatalf("Query = %d, %v", off, ok)
	}
	if got := o.QueueOffsets("group1", "TopicTest"); !reflect.DeepEqual(got, map[int32]int64{0: 120, 1: 98, 3: -1}) {
		t.Fatalf("QueueOffsets = %v", got)
	}
	if got := o.TopicsOfGroup("group1"); !slices.Equal(got, []string{"%RETRY%group1", "TopicTest"}) {
		t.Fatalf("TopicsOfGroup = %v", got)
	}
	if len(o.Wrapper().OffsetTable) != 2 {
		t.Fatalf("malformed key kept: %v", o.Wrapper().OffsetTable)
	}
}

func TestOffsetsPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config", "consumerOffset.json")
	o, err := OpenOffsets(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Persist(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("Persist without changes wrote a file: %v", err)
	}
	o.Commit("G", "T", 0, 10)
	o.Commit("G", "T", 1, 11)
	o.Commit("H", "T", 0, 5)
	o.Commit("G", "U", 2, 7)
	o.SetPullOffset("G", "T", 0, 12)
	if err := o.Persist(); err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(path)
	if err := o.Persist(); err != nil { // nothing changed: no write, no .bak
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".bak"); !os.IsNotExist(err) {
		t.Fatalf("second Persist rewrote the file: %v", err)
	}
	re, err := OpenOffsets(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(re.Wrapper(), o.Wrapper()) {
		t.Fatalf("reopened %+v, want %+v", re.Wrapper(), o.Wrapper())
	}
	if _, ok := re.PullOffset("G", "T", 0); ok {
		t.Fatal("pull offsets must not be persisted")
	}
	if off, ok := o.PullOffset("G", "T", 0); !ok || off != 12 {
		t.Fatalf("PullOffset = %d, %v", off, ok)
	}
	if got := o.GroupsOfTopic("T"); !slices.Equal(got, []string{"G", "H"}) {
		t.Fatalf("GroupsOfTopic = %v", got)
	}

	o.DeleteTopic("T")
	if got := o.GroupsOfTopic("T"); len(got) != 0 {
		t.Fatalf("after DeleteTopic: %v", got)
	}
	if _, ok := o.PullOffset("G", "T", 0); ok {
		t.Fatal("DeleteTopic kept the pull offset")
	}
	o.DeleteGroup("G")
	if got := o.TopicsOfGroup("G"); len(got) != 0 {
		t.Fatalf("after DeleteGroup: %v", got)
	}
	if err := o.Persist(); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(path + ".bak"); st2 == nil || st2.Size() != st1.Size() {
		t.Fatalf(".bak should hold the previous version")
	}
	re, _ = OpenOffsets(path, nil)
	if len(re.Wrapper().OffsetTable) != 0 {
		t.Fatalf("deletes not persisted: %v", re.Wrapper().OffsetTable)
	}
	b, _ := os.ReadFile(path)
	var w protocol.ConsumerOffsetSerializeWrapper
	if err := protocol.Decode(b, &w); err != nil || w.OffsetTable == nil {
		t.Fatalf("file %s: %v", b, err)
	}
}

func TestOffsetsConcurrent(t *testing.T) {
	o, err := OpenOffsets(filepath.Join(t.TempDir(), "consumerOffset.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	const writers, n = 8, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range n {
				o.Commit("G", "T", int32(w), int64(i))
				o.SetPullOffset("G", "T", int32(w), int64(i))
			}
		}()
		go func() {
			defer wg.Done()
			last := int64(-1)
			for range n {
				if off, ok := o.Query("G", "T", int32(w)); ok {
					if off < last {
						t.Errorf("queue %d went back %d → %d", w, last, off)
						return
					}
					last = off
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if err := o.Persist(); err != nil {
				t.Error(err)
				return
			}
			_ = o.Wrapper()
			_ = o.GroupsOfTopic("T")
		}
	}()
	wg.Wait()
	for w := range writers {
		if off, _ := o.Query("G", "T", int32(w)); off != n-1 {
			t.Fatalf("queue %d = %d", w, off)
		}
	}
}

func TestOffsetsHotPathDoesNotAllocate(t *testing.T) {
	o, _ := OpenOffsets(filepath.Join(t.TempDir(), "consumerOffset.json"), nil)
	o.Commit("G", "T", 0, 1)
	o.SetPullOffset("G", "T", 0, 1)
	allocs := testing.AllocsPerRun(1000, func() {
		o.Commit("G", "T", 0, 2)
		o.Query("G", "T", 0)
		o.SetPullOffset("G", "T", 0, 2)
		o.PullOffset("G", "T", 0)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per Commit+Query", allocs)
	}
}

func BenchmarkCommitQuery(b *testing.B) {
	o, _ := OpenOffsets(filepath.Join(b.TempDir(), "consumerOffset.json"), nil)
	b.RunParallel(func(pb *testing.PB) {
		i := int64(0)
		for pb.Next() {
			i++
			o.Commit("group", "topic", int32(i&7), i)
			o.Query("group", "topic", int32(i&7))
		}
	})
}
