package broker

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/internal/storetest"
	"rocketraft/broker/meta"
	"rocketraft/config"
	"rocketraft/fsm"
	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// scheduleBroker is a classic broker (not listening) over a store in a temporary directory.
func scheduleBroker(t *testing.T, levels string) *Broker {
	t.Helper()
	return classicBroker(t, func(cfg *config.Broker) { cfg.MessageDelayLevel = levels })
}

// classicBroker is a classic broker built by New (not listening) over a store in a temporary
// directory, its configuration adjusted by tune.
func classicBroker(t *testing.T, tune func(*config.Broker)) *Broker {
	t.Helper()
	cfg := config.NewBroker()
	cfg.StorePathRootDir = t.TempDir()
	cfg.StorePathCommitLog = filepath.Join(cfg.StorePathRootDir, "commitlog")
	cfg.MappedFileSizeCommitLog = 1 << 20
	cfg.MapedFileSizeConsumeQueue = 1000 * 20
	cfg.MaxHashSlotNum, cfg.MaxIndexNum = 100, 400
	tune(cfg)
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
		if code, remark := b.delayHeader(h, now); code != remoting.Success {
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
		if code, _ := b.delayHeader(bad, now); code != remoting.MessageIllegal {
			t.Errorf("%q: code %d, want MESSAGE_ILLEGAL", bad.Properties, code)
		}
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

// failingLog is a CommitLog that refuses every append with err.
type failingLog struct{ err error }

func (f failingLog) Append(context.Context, [][]byte) ([]storage.AppendResult, error) {
	return nil, f.err
}

// TestClassicDeliver: classic mode's delivery commit appends the records, then moves and saves
// the level's progress; records the store refuses as illegal are skipped (progress moves), any
// other append error leaves the progress where it was; a flush timeout counts as stored.
func TestClassicDeliver(t *testing.T) {
	st := storetest.Open(t)
	path := filepath.Join(t.TempDir(), delayOffsetFile)
	offsets, err := meta.OpenDelayOffsets(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := message.EncodeRecord(&message.Message{Topic: "Real", QueueID: 1, Body: []byte("x"), StoreHost: storetest.Host, BornHost: storetest.Host})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := classicDeliver(st, offsets, nil)(ctx, &fsm.ScheduleDeliver{Level: 2, From: 0, To: 3, Records: [][]byte{rec}}); err != nil {
		t.Fatal(err)
	}
	if offsets.Get(2) != 3 || len(storetest.Read(t, st, "Real", 1)) != 1 {
		t.Fatalf("progress %d, real %d", offsets.Get(2), len(storetest.Read(t, st, "Real", 1)))
	}
	if again, err := meta.OpenDelayOffsets(path, nil); err != nil || again.Get(2) != 3 {
		t.Fatalf("progress not saved: %v", err)
	}
	quiet := hclog.NewNullLogger()
	if err := classicDeliver(failingLog{storage.ErrMessageIllegal}, offsets, quiet)(ctx, &fsm.ScheduleDeliver{Level: 2, From: 3, To: 4, Records: [][]byte{rec}}); err != nil || offsets.Get(2) != 4 {
		t.Fatalf("illegal records: %v, progress %d", err, offsets.Get(2))
	}
	if err := classicDeliver(failingLog{storage.ErrFlushDiskTimeout}, offsets, quiet)(ctx, &fsm.ScheduleDeliver{Level: 2, From: 4, To: 5, Records: [][]byte{rec}}); err != nil || offsets.Get(2) != 5 {
		t.Fatalf("flush timeout: %v, progress %d", err, offsets.Get(2))
	}
	if err := classicDeliver(failingLog{errors.New("disk gone")}, offsets, quiet)(ctx, &fsm.ScheduleDeliver{Level: 2, From: 5, To: 6, Records: [][]byte{rec}}); err == nil || offsets.Get(2) != 5 {
		t.Fatalf("append error: %v, progress %d", err, offsets.Get(2))
	}
	if err := classicDeliver(failingLog{errors.New("unused")}, offsets, quiet)(ctx, &fsm.ScheduleDeliver{Level: 1, From: 0, To: 2}); err != nil || offsets.Get(1) != 2 {
		t.Fatalf("a step of skipped units only: %v, progress %d", err, offsets.Get(1))
	}
}
