package broker

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"rocketraft/broker/meta"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// sendBackStore is a store on a MemFS the fixture's place hands out for reads.
func sendBackStore(t *testing.T) *storage.Store {
	t.Helper()
	sc := storage.DefaultConfig("/data/store")
	sc.FS = vfs.NewMemFS()
	sc.MappedFileSizeCommitLog = 1 << 20
	st, err := storage.Open(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// storeOriginal appends the message a consumer will hand back and returns its offset.
func storeOriginal(t *testing.T, st *storage.Store, reconsume int32, props string) int64 {
	t.Helper()
	rec, err := message.EncodeRecord(&message.Message{Topic: "T", QueueID: 1, Body: []byte("orig"), BornTimestamp: 5,
		BornHost: sendTestStoreHost, StoreHost: sendTestStoreHost, ReconsumeTimes: reconsume, Properties: props})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Append(context.Background(), [][]byte{rec})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].PhysicalOffset
}

// sendBack hands the record at offset back for group g.
func (f *sendFixture) sendBack(t *testing.T, offset int64, delayLevel int, extra map[string]string) *remoting.Command {
	t.Helper()
	ext := map[string]string{"offset": strconv.FormatInt(offset, 10), "group": "g", "delayLevel": strconv.Itoa(delayLevel)}
	for k, v := range extra {
		ext[k] = v
	}
	return f.invoke(t, remoting.NewRequest(remoting.ConsumerSendMsgBack, ext, nil))
}

// A message handed back is stored as a delayed copy for %RETRY%<group> (level 3 + reconsumeTimes
// by default) carrying its first topic and msgId; past the limit, or asked with a negative
// level, it goes to %DLQ%<group> queue 0 undelayed.
func TestSenderSendBack(t *testing.T) {
	f := newSendFixture(t)
	f.pl.store = sendBackStore(t)
	f.groups["g"] = &protocol.SubscriptionGroupConfig{GroupName: "g", RetryMaxTimes: 2, RetryQueueNums: 1}
	f.s.delayLevels = append(f.s.delayLevels, f.s.delayLevels...) // 6 levels
	first := storeOriginal(t, f.pl.store, 0, "TAGS\x01a\x02")
	if resp := f.sendBack(t, first, 0, nil); resp.Code != remoting.Success {
		t.Fatalf("send back: %d %q", resp.Code, resp.Remark)
	}
	m := f.log.stored(t)[0]
	props := message.ParseProperties(m.Properties)
	if m.Topic != meta.ScheduleTopic || m.QueueID != 2 || m.ReconsumeTimes != 1 || string(m.Body) != "orig" {
		t.Fatalf("retry copy %s/%d reconsume %d", m.Topic, m.QueueID, m.ReconsumeTimes)
	}
	want := map[string]string{
		message.PropertyRealTopic: "%RETRY%g", message.PropertyRetryTopic: "T", message.PropertyDelayTimeLevel: "3",
		message.PropertyOriginMessageID: message.OffsetMsgID(sendTestStoreHost, first), message.PropertyCluster: "C1",
		message.PropertyWaitStoreMsgOK: "false", message.PropertyTags: "a",
	}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("retry copy %s = %q, want %q", k, props[k], v)
		}
	}
	if len(f.ensured) != 1 || f.ensured[0] != "%RETRY%g" || f.registered != 1 {
		t.Fatalf("ensured %v registered %d", f.ensured, f.registered)
	}

	// Past the limit, and a negative level: the DLQ, keeping the first delivery's msgId.
	tired := storeOriginal(t, f.pl.store, 2, "ORIGIN_MESSAGE_ID\x01FIRST\x02RETRY_TOPIC\x01T0\x02DELAY\x015\x02")
	fresh := storeOriginal(t, f.pl.store, 0, "")
	for _, c := range []struct {
		offset int64
		level  int
	}{{tired, 0}, {fresh, -1}} {
		if resp := f.sendBack(t, c.offset, c.level, nil); resp.Code != remoting.Success {
			t.Fatalf("to the DLQ: %d %q", resp.Code, resp.Remark)
		}
	}
	ms := f.log.stored(t)
	for _, dlq := range ms[1:] {
		props := message.ParseProperties(dlq.Properties)
		if dlq.Topic != "%DLQ%g" || dlq.QueueID != 0 || props[message.PropertyDelayTimeLevel] != "" || props[message.PropertyRealTopic] != "" {
			t.Fatalf("DLQ copy %s/%d %q", dlq.Topic, dlq.QueueID, dlq.Properties)
		}
	}
	if p := message.ParseProperties(ms[1].Properties); p[message.PropertyOriginMessageID] != "FIRST" || p[message.PropertyRetryTopic] != "T0" {
		t.Fatalf("DLQ copy lost its first delivery: %q", ms[1].Properties)
	}
}

// Send-backs that cannot be served are answered with an error (the client then sends the
// retry itself), and a group that wants no retries drops the message.
func TestSenderSendBackRefusals(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(f *sendFixture) int64
		want   int32
		remark string
	}{
		{"unknown group", func(f *sendFixture) int64 { return 0 }, remoting.SubscriptionGroupNotExist, "subscription group not exist, g"},
		{"no retries wanted", func(f *sendFixture) int64 {
			f.groups["g"] = &protocol.SubscriptionGroupConfig{GroupName: "g"}
			return 0
		}, remoting.Success, ""},
		{"no such record", func(f *sendFixture) int64 {
			f.groups["g"] = &protocol.SubscriptionGroupConfig{GroupName: "g", RetryQueueNums: 1}
			f.pl.store = sendBackStore(t)
			return 1 << 16
		}, remoting.SystemError, "look message by offset failed, 65536"},
		{"broker read-only", func(f *sendFixture) int64 {
			f.groups["g"] = &protocol.SubscriptionGroupConfig{GroupName: "g", RetryQueueNums: 1}
			f.perm = protocol.PermRead
			return 0
		}, remoting.NoPermission, "sending message is forbidden"},
		{"not writable", func(f *sendFixture) int64 {
			f.pl.writableOK, f.pl.remark = false, "slave"
			return 0
		}, remoting.ServiceNotAvailable, "slave"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newSendFixture(t)
			resp := f.sendBack(t, c.setup(f), 1, nil)
			if resp.Code != c.want || !strings.Contains(resp.Remark, c.remark) {
				t.Fatalf("code %d %q, want %d with %q", resp.Code, resp.Remark, c.want, c.remark)
			}
			if n := len(f.log.stored(t)); n != 0 {
				t.Fatalf("%d records appended", n)
			}
		})
	}
	f := newSendFixture(t)
	if resp := f.invoke(t, remoting.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{"group": "g"}, nil)); resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "bad send-back header") {
		t.Fatalf("bad header: %d %q", resp.Code, resp.Remark)
	}
}

// END_TRANSACTION: a classic slave refuses it, a non-writable node that cannot forward answers
// SERVICE_NOT_AVAILABLE, a bad header is SYSTEM_ERROR, and an unknown state is left to the
// check-back without touching the transaction service (nil here).
func TestSenderEndTransactionGate(t *testing.T) {
	end := func(f *sendFixture, ext map[string]string) *remoting.Command {
		return f.s.handleEndTransaction(nil, remoting.NewRequest(remoting.EndTransaction, ext, nil))
	}
	valid := map[string]string{"producerGroup": "PG", "tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "0"}
	f := newSendFixture(t)
	if r := end(f, valid); r.Code != remoting.Success {
		t.Fatalf("unknown state: %d %q", r.Code, r.Remark)
	}
	if r := end(f, map[string]string{"tranStateTableOffset": "0", "commitLogOffset": "0", "commitOrRollback": "8"}); r.Code != remoting.SystemError || !strings.Contains(r.Remark, "bad END_TRANSACTION header") {
		t.Fatalf("bad header: %d %q", r.Code, r.Remark)
	}
	f.pl.part = haSlave
	if r := end(f, valid); r.Code != remoting.SlaveNotAvailable {
		t.Fatalf("classic slave: %d %q", r.Code, r.Remark)
	}
	f.pl.writableOK, f.pl.remark = false, "not the leader"
	if r := end(f, valid); r.Code != remoting.ServiceNotAvailable || r.Remark != "not the leader" {
		t.Fatalf("not writable: %d %q", r.Code, r.Remark)
	}
}
