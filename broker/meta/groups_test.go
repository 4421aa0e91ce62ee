package meta

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"rocketraft/protocol"
)

func TestGroups(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscriptionGroup.json")
	g, err := OpenGroups(path, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if c, created, err := g.GetOrCreate("G", false); c != nil || created || err != nil {
		t.Fatalf("GetOrCreate(no auto) = %+v, %v, %v", c, created, err)
	}
	v0 := g.DataVersion()
	c, created, err := g.GetOrCreateAt("G", true, time.UnixMilli(5))
	if err != nil || !created || !reflect.DeepEqual(c, protocol.NewSubscriptionGroupConfig("G")) {
		t.Fatalf("GetOrCreate(auto) = %+v, %v, %v", c, created, err)
	}
	if dv := g.DataVersion(); dv.Counter != v0.Counter+1 || dv.Timestamp != 5 {
		t.Fatalf("DataVersion %+v", dv)
	}
	if _, created, _ := g.GetOrCreate("G", true); created {
		t.Fatal("created twice")
	}
	c.RetryMaxTimes = 3
	c.ConsumeMessageOrderly = true
	if err := g.Put(c); err != nil {
		t.Fatal(err)
	}
	if err := g.Put(protocol.NewSubscriptionGroupConfig("H")); err != nil {
		t.Fatal(err)
	}
	if ok, err := g.Delete("H"); !ok || err != nil {
		t.Fatalf("Delete = %v, %v", ok, err)
	}
	if ok, _ := g.Delete("H"); ok {
		t.Fatal("deleted twice")
	}
	want := g.Wrapper()
	re, err := OpenGroups(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := re.Wrapper(); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened\n got %+v\nwant %+v", got, want)
	}
	if got := re.Get("G"); got.RetryMaxTimes != 3 || !got.ConsumeMessageOrderly {
		t.Fatalf("G = %+v", got)
	}
}

// subscriptionGroup.json as a Java 4.9 broker writes it, with a forbidden table.
const javaGroups = `{
	"dataVersion":{"counter":3,"timestamp":1700000000000},
	"forbiddenTable":{"G1":{"T":1}},
	"subscriptionGroupTable":{
		"G1":{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":false,"consumeFromMinEnable":true,
			"consumeMessageOrderly":false,"groupName":"G1","notifyConsumerIdsChangedEnable":true,
			"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1},
		"G2":{"groupName":"G2"}
	}
}`

func TestOpenJavaGroupsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subscriptionGroup.json")
	os.WriteFile(path, []byte(javaGroups), 0o644)
	g, err := OpenGroups(path, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Get("G1"); c == nil || c.ConsumeEnable {
		t.Fatalf("G1 = %+v", c)
	}
	if c := g.Get("G2"); !reflect.DeepEqual(c, protocol.NewSubscriptionGroupConfig("G2")) {
		t.Fatalf("G2 = %+v (absent members must keep defaults)", c)
	}
	if w := g.Wrapper(); w.ForbiddenTable["G1"]["T"] != 1 || w.DataVersion.Counter != 3 {
		t.Fatalf("wrapper %+v", w)
	}
	// The forbidden table survives a save.
	if err := g.Put(protocol.NewSubscriptionGroupConfig("G3")); err != nil {
		t.Fatal(err)
	}
	re, _ := OpenGroups(path, nil)
	if re.Wrapper().ForbiddenTable["G1"]["T"] != 1 {
		t.Fatal("forbidden table lost")
	}
}
