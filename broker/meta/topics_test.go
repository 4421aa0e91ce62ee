package meta

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
)

func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: testWriter{t}})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func openTopics(t *testing.T, path string) *Topics {
	t.Helper()
	tp, err := OpenTopics(path, testLogger(t))
	if err != nil {
		t.Fatalf("OpenTopics: %v", err)
	}
	return tp
}

func tbw(queues, perm int32) *protocol.TopicConfig {
	tc := protocol.NewTopicConfig(protocol.AutoCreateTopicKey)
	tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm = queues, queues, perm
	return tc
}

func TestTopicsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config", "topics.json")
	tp := openTopics(t, path)
	if len(tp.Names()) != 0 {
		t.Fatalf("new table not empty: %v", tp.Names())
	}
	a := protocol.NewTopicConfig("A")
	a.Attributes = map[string]string{"+message.type": "NORMAL"}
	a.Order = true
	if err := tp.Put(a); err != nil {
		t.Fatal(err)
	}
	a.Attributes["mutated"] = "after put" // the table must hold its own copy
	if err := tp.Put(protocol.NewTopicConfig("B")); err != nil {
		t.Fatal(err)
	}
	if ok, err := tp.Delete("B"); !ok || err != nil {
		t.Fatalf("Delete(B) = %v, %v", ok, err)
	}
	if got := tp.Get("A"); got == nil || got.Attributes["mutated"] != "" || !got.Order {
		t.Fatalf("Get(A) = %+v", got)
	}
	var looked protocol.TopicConfig
	if !tp.Lookup("A", &looked) || looked.TopicName != "A" || !looked.Order || looked.Attributes["+message.type"] != "NORMAL" {
		t.Fatalf("Lookup(A) = %+v", looked)
	}
	if tp.Lookup("B", &looked) {
		t.Fatal("Lookup found the deleted B")
	}
	// The send path looks its topic up per message: nothing is copied to the heap.
	if n := testing.AllocsPerRun(100, func() { tp.Lookup("A", &looked) }); n != 0 {
		t.Fatalf("Lookup allocates %v times, want 0", n)
	}
	want := tp.Wrapper()

	re := openTopics(t, path)
	if got := re.Wrapper(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened wrapper\n got %+v\nwant %+v", got, want)
	}
	if re.DataVersion().Counter != want.DataVersion.Counter {
		t.Fatalf("DataVersion not persisted")
	}
	for _, suffix := range []string{"", ".bak"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil || !json.Valid(b) {
			t.Fatalf("%s%s: valid=%v err=%v", path, suffix, json.Valid(b), err)
		}
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf(".tmp left behind: %v", err)
	}
}

func TestTopicsBackupFallback(t *testing.T) {
	for name, damage := range map[string]func(path string){
		"corrupt": func(path string) { os.WriteFile(path, []byte(`{"topicConfigTable":{"x":`), 0o644) },
		"missing": func(path string) { os.Remove(path) },
		"empty":   func(path string) { os.WriteFile(path, nil, 0o644) },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "topics.json")
			tp := openTopics(t, path)
			if err := tp.Put(protocol.NewTopicConfig("first")); err != nil {
				t.Fatal(err)
			}
			if err := tp.Put(protocol.NewTopicConfig("second")); err != nil {
				t.Fatal(err)
			}
			// .bak now holds the table as of the first Put.
			damage(path)
			re := openTopics(t, path)
			if got := re.Names(); !slices.Equal(got, []string{"first"}) {
				t.Fatalf("names from backup = %v", got)
			}
			// The next save from the recovered table writes a good main file again.
			if err := re.Put(protocol.NewTopicConfig("third")); err != nil {
				t.Fatal(err)
			}
			if got := openTopics(t, path).Names(); !slices.Equal(got, []string{"first", "third"}) {
				t.Fatalf("after repair = %v", got)
			}
		})
	}
}

func TestCorruptWithoutBackupFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "topics.json")
	os.WriteFile(path, []byte("not json"), 0o644)
	if _, err := OpenTopics(path, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenTopics(corrupt, no bak) = %v, want ErrCorrupt", err)
	}
	os.WriteFile(path+".bak", []byte("{also bad"), 0o644)
	if _, err := OpenTopics(path, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenTopics(corrupt, corrupt bak) = %v, want ErrCorrupt", err)
	}
	os.Remove(path)
	if _, err := OpenGroups(path, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenGroups(missing, corrupt bak) = %v, want ErrCorrupt", err)
	}
}

// A topics.json as written by a Java 5.x broker: pretty-printed, with mapping members we ignore.
const javaTopics = `{
	"dataVersion":{
		"counter":12,
		"stateVersion":0,
		"timestamp":1700000000123
	},
	"topicConfigTable":{
		"TBW102":{
			"attributes":{},
			"order":false,
			"perm":7,
			"readQueueNums":8,
			"topicFilterType":"SINGLE_TAG",
			"topicName":"TBW102",
			"topicSysFlag":0,
			"writeQueueNums":8
		},
		"Orders":{
			"perm":6,
			"topicName":"Orders",
			"order":true
		}
	},
	"topicQueueMappingInfoMap":{},
	"topicQueueMappingDetailMap":{},
	"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1}
}`

func TestOpenJavaTopicsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	os.WriteFile(path, []byte(javaTopics), 0o644)
	tp := openTopics(t, path)
	if dv := tp.DataVersion(); dv.Counter != 12 || dv.Timestamp != 1700000000123 {
		t.Fatalf("DataVersion = %+v", dv)
	}
	o := tp.Get("Orders")
	if o == nil || !o.Order || o.ReadQueueNums != 16 || o.TopicFilterType != protocol.FilterSingleTag {
		t.Fatalf("Orders = %+v (absent members must keep Java defaults)", o)
	}
	if tb := tp.Get("TBW102"); tb == nil || tb.Perm != 7 || tb.WriteQueueNums != 8 {
		t.Fatalf("TBW102 = %+v", tb)
	}
}

func TestCreateFromDefault(t *testing.T) {
	multi := tbw(8, 7)
	multi.TopicFilterType = protocol.FilterMultiTag
	cases := []struct {
		name       string
		def        *protocol.TopicConfig // stored as TBW102, nil = absent
		noAuto     bool
		client     int32
		wantQueues int32 // -1 = nothing created
		wantPerm   int32
		wantFilter string
	}{
		{"inherit: client nums below default", tbw(8, 7), false, 4, 4, 6, protocol.FilterSingleTag},
		{"queue count capped by default's write queues", tbw(2, 7), false, 4, 2, 6, protocol.FilterSingleTag},
		{"perm keeps only non-inherit bits", tbw(8, protocol.PermInherit|protocol.PermRead), false, 4, 4, protocol.PermRead, protocol.FilterSingleTag},
		{"filter type copied", multi, false, 4, 4, 6, protocol.FilterMultiTag},
		{"negative client nums give zero queues", tbw(8, 7), false, -3, 0, 6, protocol.FilterSingleTag},
		{"default without inherit", tbw(8, 6), false, 4, -1, 0, ""},
		{"no default topic", nil, false, 4, -1, 0, ""},
		{"auto-create disabled strips inherit from TBW102", tbw(8, 7), true, 4, -1, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp := openTopics(t, filepath.Join(t.TempDir(), "topics.json"))
			if c.def != nil {
				if err := tp.Put(c.def); err != nil {
					t.Fatal(err)
				}
			}
			tp.SetAutoCreateTopicEnable(!c.noAuto)
			before := tp.DataVersion()
			now := time.UnixMilli(1800000000000)
			tc, created, err := tp.CreateFromDefaultAt("NewTopic", protocol.AutoCreateTopicKey, c.client, 3, now)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantQueues < 0 {
				if tc != nil || created || tp.Exists("NewTopic") || tp.DataVersion() != before {
					t.Fatalf("created %+v, %v; version %v→%v", tc, created, before, tp.DataVersion())
				}
				return
			}
			if !created || tc.ReadQueueNums != c.wantQueues || tc.WriteQueueNums != c.wantQueues || tc.Perm != c.wantPerm ||
				tc.TopicFilterType != c.wantFilter || tc.TopicSysFlag != 3 || tc.Order {
				t.Fatalf("created=%v tc=%+v", created, tc)
			}
			if dv := tp.DataVersion(); dv.Counter != before.Counter+1 || dv.Timestamp != now.UnixMilli() {
				t.Fatalf("DataVersion %+v after %+v", dv, before)
			}
			if got := openTopics(t, tp.file.path).Get("NewTopic"); !reflect.DeepEqual(got, tc) {
				t.Fatalf("not persisted: %+v", got)
			}
			again, created, err := tp.CreateFromDefault("NewTopic", protocol.AutoCreateTopicKey, 16, 0)
			if err != nil || created || !reflect.DeepEqual(again, tc) {
				t.Fatalf("second call = %+v, %v, %v", again, created, err)
			}
		})
	}
}

func TestDataVersionBumps(t *testing.T) {
	tp := openTopics(t, filepath.Join(t.TempDir(), "topics.json"))
	v0 := tp.DataVersion()
	t1 := time.UnixMilli(1700000000001)
	step := func(what string, f func() error, bump bool) {
		t.Helper()
		before := tp.DataVersion()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := tp.DataVersion()
		if bump && (got.Counter != before.Counter+1 || got.Timestamp != t1.UnixMilli()) {
			t.Fatalf("%s: version %+v → %+v, want bump", what, before, got)
		}
		if !bump && got != before {
			t.Fatalf("%s: version changed %+v → %+v", what, before, got)
		}
	}
	step("put", func() error { return tp.PutAt(protocol.NewTopicConfig("A"), t1) }, true)
	step("put same again", func() error { return tp.PutAt(protocol.NewTopicConfig("A"), t1) }, true)
	step("ensure existing", func() error { _, _, err := tp.EnsureTopicAt(protocol.NewTopicConfig("A"), t1); return err }, false)
	step("ensure new", func() error { _, _, err := tp.EnsureTopicAt(protocol.NewTopicConfig("%RETRY%G"), t1); return err }, true)
	step("delete absent", func() error { _, err := tp.DeleteAt("nope", t1); return err }, false)
	step("delete", func() error { _, err := tp.DeleteAt("A", t1); return err }, true)
	step("ensure system topics", func() error { _, err := tp.EnsureTopics(SystemTopics("C", "b", true, 8), t1); return err }, true)
	step("ensure system topics again", func() error { _, err := tp.EnsureTopics(SystemTopics("C", "b", true, 8), t1); return err }, false)
	if tp.DataVersion().Counter != v0.Counter+5 {
		t.Fatalf("counter %d, want %d", tp.DataVersion().Counter, v0.Counter+5)
	}
	if err := tp.Put(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Put(nil) = %v", err)
	}
	if _, _, err := tp.EnsureTopic(&protocol.TopicConfig{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("EnsureTopic(no name) = %v", err)
	}
}

func TestSystemTopics(t *testing.T) {
	got := map[string]*protocol.TopicConfig{}
	var order []string
	for _, tc := range SystemTopics("DefaultCluster", "broker-a", true, 8) {
		got[tc.TopicName] = tc
		order = append(order, tc.TopicName)
	}
	want := map[string][2]int32{ // queues, perm
		"SELF_TEST_TOPIC":             {1, 6},
		"TBW102":                      {8, 7},
		"BenchmarkTest":               {1024, 6},
		"DefaultCluster":              {16, 7},
		"broker-a":                    {1, 7},
		"OFFSET_MOVED_EVENT":          {1, 6},
		"SCHEDULE_TOPIC_XXXX":         {18, 6},
		"DefaultCluster_REPLY_TOPIC":  {1, 6},
		"RMQ_SYS_TRANS_HALF_TOPIC":    {1, 6},
		"RMQ_SYS_TRANS_OP_HALF_TOPIC": {1, 6},
	}
	if len(got) != len(want) {
		t.Fatalf("topics %v", order)
	}
	for name, w := range want {
		tc := got[name]
		if tc == nil || tc.ReadQueueNums != w[0] || tc.WriteQueueNums != w[0] || tc.Perm != w[1] {
			t.Errorf("%s = %+v, want queues %d perm %d", name, tc, w[0], w[1])
		}
	}
	for _, tc := range SystemTopics("C", "b", false, 8) {
		if tc.TopicName == protocol.AutoCreateTopicKey {
			t.Fatal("TBW102 created with auto-create disabled")
		}
	}
	for _, name := range []string{"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"} {
		if !IsNotAllowedToSend(name) || !IsSystemTopic(name) {
			t.Errorf("%s: notAllowed=%v system=%v", name, IsNotAllowedToSend(name), IsSystemTopic(name))
		}
	}
	for _, name := range []string{"TBW102", "BenchmarkTest", "%RETRY%G", "TopicTest"} {
		if IsNotAllowedToSend(name) {
			t.Errorf("%s must be sendable", name)
		}
	}
	if !IsSystemTopic("TBW102") || !IsSystemTopic("rmq_sys_wheel_timer") || IsSystemTopic("TopicTest") {
		t.Error("IsSystemTopic")
	}
}

func TestSaveFailureKeepsMemoryAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	tp := openTopics(t, path)
	if err := tp.Put(protocol.NewTopicConfig("A")); err != nil {
		t.Fatal(err)
	}
	// A directory where the temp file goes makes the next save fail (even as root).
	if err := os.Mkdir(path+".tmp", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tp.Put(protocol.NewTopicConfig("B")); err == nil {
		t.Fatal("Put succeeded although the save failed")
	}
	if !tp.Exists("B") {
		t.Fatal("failed save must keep the in-memory change (it is already applied)")
	}
	if got := openTopics(t, path).Names(); !slices.Equal(got, []string{"A"}) {
		t.Fatalf("file after failed save = %v, want the previous version", got)
	}
	os.Remove(path + ".tmp")
	if err := tp.Put(protocol.NewTopicConfig("C")); err != nil {
		t.Fatal(err)
	}
	if got := openTopics(t, path).Names(); !slices.Equal(got, []string{"A", "B", "C"}) {
		t.Fatalf("file after recovery = %v", got)
	}
}

func TestBackupDoesNotMergeWithPartialMain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	// Valid JSON whose second entry fails to decode after the first was stored.
	os.WriteFile(path, []byte(`{"topicConfigTable":{"junk":{"topicName":"junk"},"bad":{"readQueueNums":"x"}}}`), 0o644)
	b, _ := json.Marshal(protocol.TopicConfigSerializeWrapper{TopicConfigTable: map[string]*protocol.TopicConfig{"good": protocol.NewTopicConfig("good")}})
	os.WriteFile(path+".bak", b, 0o644)
	if got := openTopics(t, path).Names(); !slices.Equal(got, []string{"good"}) {
		t.Fatalf("names = %v, want only the backup's", got)
	}
}

// FromDefault derives exactly what CreateFromDefault stores, without storing it; ReplaceAll swaps
// the whole table and version and persists them.
func TestTopicsFromDefaultAndReplaceAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "topics.json")
	tp := openTopics(t, path)
	if err := tp.Put(tbw(8, protocol.PermInherit|protocol.PermReadWrite)); err != nil {
		t.Fatal(err)
	}
	derived := tp.FromDefault("X", protocol.AutoCreateTopicKey, 4, 0)
	if derived == nil || tp.Exists("X") {
		t.Fatalf("FromDefault = %+v, stored=%v", derived, tp.Exists("X"))
	}
	created, ok, err := tp.CreateFromDefault("X", protocol.AutoCreateTopicKey, 4, 0)
	if err != nil || !ok || !reflect.DeepEqual(derived, created) {
		t.Fatalf("CreateFromDefault %+v differs from FromDefault %+v (%v %v)", created, derived, ok, err)
	}
	if tp.FromDefault("Y", "missing", 4, 0) != nil {
		t.Fatal("derived from a missing default")
	}
	w := protocol.TopicConfigSerializeWrapper{
		TopicConfigTable: map[string]*protocol.TopicConfig{"Z": {TopicName: "Z", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}},
		DataVersion:      protocol.DataVersion{Timestamp: 5, Counter: 9},
	}
	if err := tp.ReplaceAll(w); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tp.Names(), []string{"Z"}) || tp.DataVersion() != w.DataVersion {
		t.Fatalf("after ReplaceAll: %v %+v", tp.Names(), tp.DataVersion())
	}
	if again := openTopics(t, path); !reflect.DeepEqual(again.Wrapper(), tp.Wrapper()) {
		t.Fatal("ReplaceAll not persisted")
	}
}
