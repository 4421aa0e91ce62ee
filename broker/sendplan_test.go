package broker

import (
	"context"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// typeOfProps is the metrics type of a send carrying props.
// newSendPlan is a plan read from h, as the send path reads its own in place.
func newSendPlan(h *protocol.SendMessageRequestHeader) *sendPlan {
	p := &sendPlan{}
	p.read(h)
	return p
}

func typeOfProps(props string) int {
	k := message.ReadKnown(props)
	return metricTypeOf(&k)
}

// sentPlan is the plan of a plain send of props to topic.
func sentPlan(topic, props string) *sendPlan {
	return newSendPlan(&protocol.SendMessageRequestHeader{Topic: topic, Properties: props})
}

// delayHeader runs the send path's classification and delay rewrite on h and writes the target
// back into h (tests only: the send path itself leaves the header alone).
func (b *Broker) delayHeader(h *protocol.SendMessageRequestHeader, now time.Time) (int32, string) {
	p := newSendPlan(h)
	if code, remark := p.classify(false, b.delayLevels, now); code != remoting.Success {
		return code, remark
	}
	if p.kind == kindDelay || p.kind == kindTimer {
		b.applyDelay(p, nil)
	}
	h.Topic, h.QueueID, h.Properties = p.topic, p.queueID, p.props
	return remoting.Success, ""
}

// classified is the plan of a send to T after classification, and the answer's code.
func classified(props string, sysFlag, reconsume int32, batch bool) (*sendPlan, int32) {
	p := newSendPlan(&protocol.SendMessageRequestHeader{Topic: "T", Properties: props, SysFlag: sysFlag, ReconsumeTimes: reconsume})
	code, _ := p.classify(batch, []time.Duration{time.Second, 5 * time.Second, 10 * time.Second}, time.UnixMilli(1_800_000_000_000))
	return p, code
}

// The one classifier against RocketMQ's rules (SendMessageProcessor, HookUtils), edge cases
// included; the metrics type of the same sends is TestMessageTypeOf's.
func TestClassifySend(t *testing.T) {
	cases := []struct {
		name      string
		props     string
		sysFlag   int32
		reconsume int32
		kind      sendKind
		level     int
	}{
		{"half", "TRAN_MSG\x01true\x02", message.TransactionPreparedType, 0, kindHalf, 0},
		{"TRAN_MSG in capitals (Boolean.parseBoolean)", "TRAN_MSG\x01TRUE\x02", 0, 0, kindHalf, 0},
		{"a first send ignores DELAY, even a bad one", "TRAN_MSG\x01true\x02DELAY\x01x\x02", 0, 0, kindHalf, 0},
		{"a retry carrying TRAN_MSG and DELAY > 0 is delayed", "TRAN_MSG\x01true\x02DELAY\x013\x02", 0, 1, kindDelay, 3},
		{"a retry carrying TRAN_MSG and DELAY=0 stays a half", "TRAN_MSG\x01true\x02DELAY\x010\x02", 0, 2, kindHalf, 0},
		{"delay capped at the highest level", "DELAY\x0140\x02", message.TransactionCommitType, 0, kindDelay, 3},
		{"PREPARED sysFlag without TRAN_MSG", "DELAY\x012\x02", message.TransactionPreparedType, 0, kindPrepared, 0},
		{"ROLLBACK sysFlag", "DELAY\x012\x02", message.TransactionRollbackType, 0, kindRollback, 0},
		{"a level wins over a timer", "DELAY\x011\x02TIMER_DELAY_SEC\x01100\x02", 0, 0, kindDelay, 1},
		{"TIMER_DELAY_SEC before TIMER_DELIVER_MS", "TIMER_DELIVER_MS\x011\x02TIMER_DELAY_SEC\x0111\x02", 0, 0, kindTimer, 3},
	}
	for _, c := range cases {
		p, code := classified(c.props, c.sysFlag, c.reconsume, false)
		if code != remoting.Success || p.kind != c.kind || p.level != c.level {
			t.Errorf("%s: code %d kind %s level %d, want kind %s level %d", c.name, code, p.kind, p.level, c.kind, c.level)
		}
	}
	// Stored as normal: no level, a timer due already, a commercial-edition property, a batch,
	// a later duplicate DELAY=0.
	for _, props := range []string{"DELAY\x010\x02", "TIMER_DELIVER_MS\x015\x02", "__STARTDELIVERTIME\x019999999999999\x02", "DELAY\x012\x02DELAY\x010\x02"} {
		if p, code := classified(props, 0, 0, false); code != remoting.Success || p.kind != kindNormal {
			t.Errorf("%q: code %d kind %s, want normal", props, code, p.kind)
		}
	}
	if p, _ := classified("DELAY\x012\x02", 0, 0, true); p.kind != kindNormal {
		t.Errorf("a batch is %s, want normal", p.kind)
	}
	// MESSAGE_ILLEGAL: a bad DELAY (on a retry carrying TRAN_MSG too), a timer too far ahead.
	for _, c := range []struct {
		props     string
		reconsume int32
	}{{"DELAY\x01x\x02", 0}, {"TRAN_MSG\x01true\x02DELAY\x01x\x02", 2}, {"TIMER_DELAY_SEC\x019999999\x02", 0}, {"TIMER_DELAY_SEC\x01-1\x02", 0}} {
		if _, code := classified(c.props, 0, c.reconsume, false); code != remoting.MessageIllegal {
			t.Errorf("%q: code %d, want MESSAGE_ILLEGAL", c.props, code)
		}
	}
}

// The send path leaves the request header as the client sent it.
func TestSendPlanLeavesHeader(t *testing.T) {
	b := scheduleBroker(t, "1s 2s 4s")
	props := message.FormatProperties(map[string]string{"DELAY": "2", "TAGS": "a"})
	h := &protocol.SendMessageRequestHeader{Topic: "Real", QueueID: 1, Properties: props}
	before := *h
	p := newSendPlan(h)
	if code, remark := p.classify(false, b.delayLevels, time.Now()); code != remoting.Success {
		t.Fatal(remark)
	}
	b.applyDelay(p, nil)
	if p.topic == h.Topic || p.props == h.Properties {
		t.Fatalf("the plan's target was not rewritten: %+v", p)
	}
	if *h != before {
		t.Fatalf("header changed: %+v, was %+v", *h, before)
	}
}

// One plain send reads its properties once in all on the node that takes it, in classic and in
// DLedger mode: on the send path (the plan), whose read the store's append (on a DLedger
// leader, its own apply: fsm.LeaderScans) uses instead of reading them again.
// TestApplyScansPropertiesOnce in fsm counts a replica's apply, which reads them once.
func TestPlainSendScansPropertiesOnceInAll(t *testing.T) {
	for _, mode := range []string{"classic", "dledger"} {
		t.Run(mode, func(t *testing.T) {
			raftAddr := ""
			if mode == "dledger" {
				raftAddr = freeAddr(t)
			}
			h := startTxnBroker(t, txnConfig(t, t.TempDir(), raftAddr, 5))
			props := message.FormatProperties(map[string]string{message.PropertyTags: "tg", message.PropertyKeys: "k1",
				message.PropertyUniqClientMessageID: "U1", message.PropertyWaitStoreMsgOK: "true"})
			sh := &protocol.SendMessageRequestHeader{ProducerGroup: "PG", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
				QueueID: 1, BornTimestamp: time.Now().UnixMilli(), Properties: props}
			send := func() {
				if resp := h.invoke(remoting.SendMessageV2, sh.ToExtV2(), []byte("body")); resp.Code != remoting.Success {
					t.Fatalf("send: %d %s", resp.Code, resp.Remark)
				}
			}
			send() // creates the topic
			before := message.PropertyScans()
			send()
			if n := message.PropertyScans() - before; n != 1 {
				t.Fatalf("one plain send scanned its properties %d times, want 1 (the plan's)", n)
			}
			if mode == "dledger" {
				if n := raftOf(t, h.b).scans.Len(); n != 0 {
					t.Fatalf("the leader's table holds %d entries once the sends are answered, want 0", n)
				}
			}
		})
	}
}

// The plan hands the store its read of the properties only where that read describes what the
// records carry: a plain, PREPARED or ROLLBACK single send, not a batch, a half, a delayed or
// timer send, nor a move to the DLQ (their properties are rewritten after the read).
func TestSendPlanScans(t *testing.T) {
	cases := []struct {
		name         string
		props        string
		sysFlag      int32
		batch, wants bool
	}{
		{"plain", "TAGS\x01a\x02KEYS\x01k\x02", 0, false, true},
		{"no properties", "", 0, false, true},
		{"a timer already due stays plain", "TIMER_DELIVER_MS\x015\x02", 0, false, true},
		{"prepared", "TAGS\x01a\x02", message.TransactionPreparedType, false, true},
		{"rollback", "TAGS\x01a\x02", message.TransactionRollbackType, false, true},
		{"batch", "TAGS\x01a\x02", 0, true, false},
		{"half", "TRAN_MSG\x01true\x02", 0, false, false},
		{"delay", "DELAY\x012\x02", 0, false, false},
		{"timer", "TIMER_DELAY_SEC\x0110\x02", 0, false, false},
	}
	for _, c := range cases {
		p, code := classified(c.props, c.sysFlag, 0, c.batch)
		if code != remoting.Success {
			t.Fatalf("%s: code %d", c.name, code)
		}
		got := p.scans(c.batch)
		if (got != nil) != c.wants {
			t.Errorf("%s: scans %v, want some: %v", c.name, got, c.wants)
			continue
		}
		if got != nil && (len(got) != 1 || got[0].Props != c.props || got[0].Known != &p.known) {
			t.Errorf("%s: scans %+v, want the plan's read of %q", c.name, got, c.props)
		}
	}
	p := sentPlan("%RETRY%G", "TAGS\x01a\x02DELAY\x013\x02")
	p.toDLQTarget("%DLQ%G")
	if got := p.scans(false); got != nil {
		t.Errorf("a move to the DLQ handed the store %+v", got)
	}
}

// scanLog is a commit log that records which append it was asked for.
type scanLog struct {
	plain   int
	scanned [][]storage.Scanned
}

func (l *scanLog) Append(context.Context, [][]byte) ([]storage.AppendResult, error) {
	l.plain++
	return nil, nil
}

func (l *scanLog) AppendScanned(_ context.Context, _ [][]byte, scans []storage.Scanned) ([]storage.AppendResult, error) {
	l.scanned = append(l.scanned, scans)
	return nil, nil
}

// appendScanned hands the reads to a commit log that takes them, and appends plainly when there
// are none or the log does not take them.
func TestAppendScanned(t *testing.T) {
	l := &scanLog{}
	read := []storage.Scanned{{Props: "x"}}
	_, _ = appendScanned(context.Background(), l, nil, read)
	_, _ = appendScanned(context.Background(), l, nil, nil)
	if l.plain != 1 || len(l.scanned) != 1 || l.scanned[0][0].Props != "x" {
		t.Fatalf("plain %d, scanned %+v", l.plain, l.scanned)
	}
	plainOnly := struct{ CommitLog }{l}
	_, _ = appendScanned(context.Background(), plainOnly, nil, read)
	if l.plain != 2 || len(l.scanned) != 1 {
		t.Fatalf("a plain commit log: plain %d, scanned %d", l.plain, len(l.scanned))
	}
}
