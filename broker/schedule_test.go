package broker

import (
	"net/netip"
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
