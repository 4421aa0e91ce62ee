package broker

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

func TestPickLevel(t *testing.T) {
	levels := []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, time.Minute}
	for _, c := range []struct {
		left time.Duration
		want int
	}{{0, 1}, {500 * time.Millisecond, 1}, {time.Second, 1}, {4 * time.Second, 1}, {5 * time.Second, 2}, {59 * time.Second, 3}, {time.Hour, 4}} {
		if got := pickLevel(levels, c.left); got != c.want {
			t.Errorf("pickLevel(%v) = %d, want %d", c.left, got, c.want)
		}
	}
	// Levels need not be sorted.
	if got := pickLevel([]time.Duration{time.Minute, time.Second, 10 * time.Second}, 30*time.Second); got != 3 {
		t.Errorf("unsorted levels: %d, want 3", got)
	}
}

// scheduleBroker is a classic broker (not listening) over a store in a temporary directory.
func scheduleBroker(t *testing.T, levels string) *Broker {
	t.Helper()
	cfg := config.NewBroker()
	cfg.StorePathRootDir = t.TempDir()
	cfg.StorePathCommitLog = filepath.Join(cfg.StorePathRootDir, "commitlog")
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MapedFileSizeConsumeQueue = 1000 * 20
	cfg.MaxHashSlotNum, cfg.MaxIndexNum = 100, 400
	cfg.MessageDelayLevel = levels
	b, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.storeHost = netip.MustParseAddrPort("127.0.0.1:10911")
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestApplyDelay(t *testing.T) {
	b := scheduleBroker(t, "1s 2s 4s")
	now := time.UnixMilli(1_800_000_000_000)
	hdr := func(props ...string) *protocol.SendMessageRequestHeader {
		m := map[string]string{message.PropertyUniqClientMessageID: "U1", message.PropertyTags: "T"}
		for i := 0; i+1 < len(props); i += 2 {
			m[props[i]] = props[i+1]
		}
		return &protocol.SendMessageRequestHeader{Topic: "Real", QueueID: 3, Properties: message.FormatProperties(m)}
	}
	check := func(name string, h *protocol.SendMessageRequestHeader, topic string, qid int32, want map[string]string) {
		t.Helper()
		if code, remark := b.applyDelay(h, now); code != remoting.Success {
			t.Fatalf("%s: %d %s", name, code, remark)
		}
		if h.Topic != topic || h.QueueID != qid {
			t.Errorf("%s: %s/%d, want %s/%d", name, h.Topic, h.QueueID, topic, qid)
		}
		p := message.ParseProperties(h.Properties)
		for k, v := range want {
			if p[k] != v {
				t.Errorf("%s: property %s = %q, want %q (all: %v)", name, k, p[k], v, p)
			}
		}
	}
	check("level 2", hdr("DELAY", "2"), meta.ScheduleTopic, 1, map[string]string{"REAL_TOPIC": "Real", "REAL_QID": "3", "DELAY": "2", "UNIQ_KEY": "U1"})
	check("level capped", hdr("DELAY", "40"), meta.ScheduleTopic, 2, map[string]string{"REAL_TOPIC": "Real"})
	check("level 0", hdr("DELAY", "0"), "Real", 3, map[string]string{"REAL_TOPIC": ""})
	check("no delay", hdr(), "Real", 3, map[string]string{"REAL_TOPIC": ""})
	check("level wins over timer", hdr("DELAY", "1", "TIMER_DELAY_SEC", "100"), meta.ScheduleTopic, 0, map[string]string{"TIMER_DELAY_SEC": "", "TIMER_DELIVER_MS": ""})
	check("timer 3 s", hdr("TIMER_DELAY_SEC", "3"), meta.ScheduleTopic, 1, map[string]string{"TIMER_DELIVER_MS": strconv.FormatInt(now.UnixMilli()+3000, 10), "TIMER_DELAY_SEC": "", "REAL_TOPIC": "Real"})
	check("timer 90 s ms", hdr("TIMER_DELAY_MS", "90000"), meta.ScheduleTopic, 2, map[string]string{"TIMER_DELIVER_MS": strconv.FormatInt(now.UnixMilli()+90000, 10)})
	check("timer absolute", hdr("TIMER_DELIVER_MS", strconv.FormatInt(now.UnixMilli()+1500, 10)), meta.ScheduleTopic, 0, nil)
	check("timer in the past", hdr("TIMER_DELIVER_MS", "5"), "Real", 3, map[string]string{"REAL_TOPIC": ""})
	half := hdr("DELAY", "2")
	half.SysFlag = message.TransactionPreparedType
	check("half message", half, "Real", 3, nil)
	for _, bad := range []*protocol.SendMessageRequestHeader{hdr("DELAY", "x"), hdr("TIMER_DELAY_SEC", "-1"), hdr("TIMER_DELAY_SEC", "9999999"), hdr("TIMER_DELIVER_MS", strconv.FormatInt(now.Add(4*24*time.Hour).UnixMilli(), 10))} {
		if code, _ := b.applyDelay(bad, now); code != remoting.MessageIllegal {
			t.Errorf("%q: code %d, want MESSAGE_ILLEGAL", bad.Properties, code)
		}
	}
}

// storeDelayed appends a send of topic Real with props as handleSend would, stored at ts.
func storeDelayed(t *testing.T, b *Broker, ts time.Time, body string, props map[string]string) {
	t.Helper()
	h := &protocol.SendMessageRequestHeader{Topic: "Real", QueueID: 1, Properties: message.FormatProperties(props), BornTimestamp: ts.UnixMilli() - 5}
	if code, remark := b.applyDelay(h, ts); code != remoting.Success {
		t.Fatal(remark)
	}
	rec, err := message.EncodeRecord(&message.Message{Topic: h.Topic, QueueID: h.QueueID, BornTimestamp: h.BornTimestamp,
		StoreTimestamp: ts.UnixMilli(), StoreHost: b.storeHost, Body: []byte(body), Properties: h.Properties})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := localStore(t, b).Append(context.Background(), [][]byte{rec}); err != nil {
		t.Fatal(err)
	}
}

// TestSchedulerClassic: a level's messages are handed out only once due, re-encoded for their
// real topic, and the progress is saved; a timer message not yet due goes to another level.
func TestSchedulerClassic(t *testing.T) {
	b := scheduleBroker(t, "1s 2s 4s")
	t0 := time.UnixMilli(1_800_000_000_000)
	storeDelayed(t, b, t0, "a", map[string]string{"DELAY": "2", "UNIQ_KEY": "UA", "KEYS": "ka", "TAGS": "ta"})
	storeDelayed(t, b, t0.Add(500*time.Millisecond), "b", map[string]string{"DELAY": "2", "UNIQ_KEY": "UB"})
	storeDelayed(t, b, t0, "timer", map[string]string{"TIMER_DELAY_MS": "6500", "UNIQ_KEY": "UT"}) // level 3 (4 s)

	if s, err := b.nextStep(2, t0.Add(1999*time.Millisecond)); err != nil || s != nil {
		t.Fatalf("before due: %+v %v", s, err)
	}
	s, err := b.nextStep(2, t0.Add(2200*time.Millisecond))
	if err != nil || s == nil || s.From != 0 || s.To != 1 || len(s.Records) != 1 {
		t.Fatalf("first due: %+v %v", s, err)
	}
	if err := b.deliverStep(s); err != nil {
		t.Fatal(err)
	}
	if got := b.delayOffsets.Get(2); got != 1 {
		t.Fatalf("progress %d, want 1", got)
	}
	if _, err := os.Stat(filepath.Join(b.cfg.StorePathRootDir, "config", delayOffsetFile)); err != nil {
		t.Fatalf("progress not saved: %v", err)
	}
	r := localStore(t, b).GetMessages("Real", 1, 0, 10, 0, nil)
	if len(r.Records) != 1 {
		t.Fatalf("real topic holds %d records", len(r.Records))
	}
	m, _, err := message.DecodeRecord(r.Records[0])
	if err != nil {
		t.Fatal(err)
	}
	p := message.ParseProperties(m.Properties)
	if string(m.Body) != "a" || p["DELAY"] != "" || p["UNIQ_KEY"] != "UA" || p["KEYS"] != "ka" || p["TAGS"] != "ta" || p["WAIT"] != "false" || m.StoreTimestamp != t0.Add(2200*time.Millisecond).UnixMilli() {
		t.Fatalf("delivered: body %q props %v store %d", m.Body, p, m.StoreTimestamp)
	}
	s, _ = b.nextStep(2, t0.Add(3*time.Second))
	if s == nil || s.From != 1 || s.To != 2 {
		t.Fatalf("second: %+v", s)
	}
	if err := b.deliverStep(s); err != nil {
		t.Fatal(err)
	}
	if s, _ := b.nextStep(2, t0.Add(time.Hour)); s != nil {
		t.Fatalf("nothing left, got %+v", s)
	}

	// The timer message (due at +6.5 s) waits in level 3 (4 s), then in level 2 (2 s) for the
	// 2.5 s left, and only then reaches Real.
	s, _ = b.nextStep(3, t0.Add(4*time.Second))
	if s == nil || len(s.Records) != 1 {
		t.Fatalf("timer step: %+v", s)
	}
	tm, _, _ := message.DecodeRecord(s.Records[0])
	if tm.Topic != meta.ScheduleTopic || tm.QueueID != 1 {
		t.Fatalf("timer message not due yet went to %s/%d, want level 2", tm.Topic, tm.QueueID)
	}
	if err := b.deliverStep(s); err != nil {
		t.Fatal(err)
	}
	s, _ = b.nextStep(2, t0.Add(6600*time.Millisecond))
	if s == nil || len(s.Records) != 1 {
		t.Fatalf("timer second hop: %+v", s)
	}
	tm, _, _ = message.DecodeRecord(s.Records[0])
	if tm.Topic != "Real" || message.ParseProperties(tm.Properties)["TIMER_DELIVER_MS"] != strconv.FormatInt(t0.Add(6500*time.Millisecond).UnixMilli(), 10) {
		t.Fatalf("due timer message went to %s with %q", tm.Topic, tm.Properties)
	}
}

func TestParseSendBackHeader(t *testing.T) {
	h, err := parseSendBackHeader(map[string]string{"offset": "42", "group": "g", "delayLevel": "0", "maxReconsumeTimes": "3", "originMsgId": "X"})
	if err != nil || h.Offset != 42 || h.Group != "g" || h.DelayLevel != 0 || h.MaxReconsumeTimes == nil || *h.MaxReconsumeTimes != 3 || h.OriginMsgID != "X" {
		t.Fatalf("%+v %v", h, err)
	}
	for _, bad := range []map[string]string{
		{"group": "g", "delayLevel": "0"},
		{"offset": "-1", "group": "g", "delayLevel": "0"},
		{"offset": "1", "delayLevel": "0"},
		{"offset": "1", "group": "g"},
		{"offset": "1", "group": "g", "delayLevel": "0", "maxReconsumeTimes": "many"},
	} {
		if _, err := parseSendBackHeader(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestTimerDueWithinLevel: a timer message with less time left than its level's delay is
// delivered at its own due time, not the level's: due at +2.5 s with levels 1 s 2 s 4 s, it
// waits 2 s in level 2, then 0.5 s (not 1 s) in level 1.
func TestTimerDueWithinLevel(t *testing.T) {
	b := scheduleBroker(t, "1s 2s 4s")
	t0 := time.UnixMilli(1_800_000_000_000)
	storeDelayed(t, b, t0, "timer", map[string]string{"TIMER_DELAY_MS": "2500", "UNIQ_KEY": "UT"}) // level 2
	s, _ := b.nextStep(2, t0.Add(2*time.Second))
	if s == nil || len(s.Records) != 1 {
		t.Fatalf("first hop: %+v", s)
	}
	if err := b.deliverStep(s); err != nil {
		t.Fatal(err)
	}
	if s, err := b.nextStep(1, t0.Add(2499*time.Millisecond)); err != nil || s != nil {
		t.Fatalf("before its due time: %+v %v", s, err)
	}
	s, _ = b.nextStep(1, t0.Add(2500*time.Millisecond))
	if s == nil || len(s.Records) != 1 {
		t.Fatalf("at its due time: %+v", s)
	}
	m, _, err := message.DecodeRecord(s.Records[0])
	if err != nil || m.Topic != "Real" || string(m.Body) != "timer" {
		t.Fatalf("delivered to %s body %q: %v", m.Topic, m.Body, err)
	}
}
