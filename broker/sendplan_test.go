package broker

import (
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// typeOfProps is the metrics type of a send carrying props.
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
		b.applyDelay(p, nil, now)
	}
	h.Topic, h.QueueID, h.Properties = p.topic, p.queueID, p.props
	return remoting.Success, ""
}

// The one classifier against RocketMQ's rules (SendMessageProcessor, HookUtils,
// BrokerMetricsManager), edge cases included.
func TestClassifySend(t *testing.T) {
	levels := []time.Duration{time.Second, 5 * time.Second, 10 * time.Second}
	now := time.UnixMilli(1_800_000_000_000)
	type want struct {
		kind   sendKind
		level  int
		metric int
		code   int32
	}
	cases := []struct {
		name      string
		props     string
		sysFlag   int32
		reconsume int32
		batch     bool
		want      want
	}{
		{"plain", "TAGS\x01a\x02", 0, 0, false, want{kindNormal, 0, msgNormal, remoting.Success}},
		{"half", "TRAN_MSG\x01true\x02", message.TransactionPreparedType, 0, false, want{kindHalf, 0, msgTransaction, remoting.Success}},
		{"half, TRAN_MSG in capitals (Boolean.parseBoolean)", "TRAN_MSG\x01TRUE\x02", 0, 0, false, want{kindHalf, 0, msgTransaction, remoting.Success}},
		{"TRAN_MSG=false", "TRAN_MSG\x01false\x02", 0, 0, false, want{kindNormal, 0, msgNormal, remoting.Success}},
		{"half ignores DELAY on a first send", "TRAN_MSG\x01true\x02DELAY\x013\x02", 0, 0, false, want{kindHalf, 0, msgTransaction, remoting.Success}},
		{"half ignores a bad DELAY on a first send", "TRAN_MSG\x01true\x02DELAY\x01x\x02", 0, 0, false, want{kindHalf, 0, msgTransaction, remoting.Success}},
		{"retry carrying TRAN_MSG and DELAY>0 is delayed, counted as transaction", "TRAN_MSG\x01true\x02DELAY\x013\x02", 0, 1, false, want{kindDelay, 3, msgTransaction, remoting.Success}},
		{"retry carrying TRAN_MSG and DELAY=0 stays a half", "TRAN_MSG\x01true\x02DELAY\x010\x02", 0, 2, false, want{kindHalf, 0, msgTransaction, remoting.Success}},
		{"retry carrying TRAN_MSG and a bad DELAY", "TRAN_MSG\x01true\x02DELAY\x01x\x02", 0, 2, false, want{kindNormal, 0, msgTransaction, remoting.MessageIllegal}},
		{"delay", "DELAY\x012\x02", 0, 0, false, want{kindDelay, 2, msgDelay, remoting.Success}},
		{"delay capped", "DELAY\x0140\x02", 0, 0, false, want{kindDelay, 3, msgDelay, remoting.Success}},
		{"DELAY=0", "DELAY\x010\x02", 0, 0, false, want{kindNormal, 0, msgDelay, remoting.Success}},
		{"bad DELAY", "DELAY\x01x\x02", 0, 0, false, want{kindNormal, 0, msgDelay, remoting.MessageIllegal}},
		{"delay on a committed message", "DELAY\x012\x02", message.TransactionCommitType, 0, false, want{kindDelay, 2, msgDelay, remoting.Success}},
		{"PREPARED sysFlag without TRAN_MSG", "DELAY\x012\x02", message.TransactionPreparedType, 0, false, want{kindPrepared, 0, msgDelay, remoting.Success}},
		{"ROLLBACK sysFlag", "DELAY\x012\x02", message.TransactionRollbackType, 0, false, want{kindRollback, 0, msgDelay, remoting.Success}},
		{"level wins over timer", "DELAY\x011\x02TIMER_DELAY_SEC\x01100\x02", 0, 0, false, want{kindDelay, 1, msgDelay, remoting.Success}},
		{"timer 6 s", "TIMER_DELAY_SEC\x016\x02", 0, 0, false, want{kindTimer, 2, msgDelay, remoting.Success}},
		{"TIMER_DELAY_SEC before TIMER_DELIVER_MS", "TIMER_DELIVER_MS\x011\x02TIMER_DELAY_SEC\x0111\x02", 0, 0, false, want{kindTimer, 3, msgDelay, remoting.Success}},
		{"timer in the past", "TIMER_DELIVER_MS\x015\x02", 0, 0, false, want{kindNormal, 0, msgDelay, remoting.Success}},
		{"timer too far", "TIMER_DELAY_SEC\x019999999\x02", 0, 0, false, want{kindNormal, 0, msgDelay, remoting.MessageIllegal}},
		{"__STARTDELIVERTIME delays nothing, counted as delay", "__STARTDELIVERTIME\x019999999999999\x02", 0, 0, false, want{kindNormal, 0, msgDelay, remoting.Success}},
		{"FIFO", "__SHARDINGKEY\x01k\x02DELAY\x012\x02", 0, 0, false, want{kindDelay, 2, msgFIFO, remoting.Success}},
		{"a later duplicate wins", "DELAY\x012\x02DELAY\x010\x02", 0, 0, false, want{kindNormal, 0, msgDelay, remoting.Success}},
		{"malformed segments skipped", "DELAY\x02\x01DELAY\x02DELAY\x01\x02", 0, 0, false, want{kindNormal, 0, msgNormal, remoting.Success}},
		{"batch is never delayed", "DELAY\x012\x02", 0, 0, true, want{kindNormal, 0, msgDelay, remoting.Success}},
	}
	for _, c := range cases {
		p := newSendPlan(&protocol.SendMessageRequestHeader{Topic: "T", Properties: c.props, SysFlag: c.sysFlag, ReconsumeTimes: c.reconsume})
		code, remark := p.classify(c.batch, levels, now)
		got := want{p.kind, p.level, p.metricType, code}
		if code != remoting.Success {
			got.kind, got.level = kindNormal, 0
		}
		if got != c.want {
			t.Errorf("%s: got kind %s level %d type %s code %d (%s), want kind %s level %d type %s code %d", c.name,
				got.kind, got.level, messageTypeNames[got.metric], got.code, remark,
				c.want.kind, c.want.level, messageTypeNames[c.want.metric], c.want.code)
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
	b.applyDelay(p, nil, time.Now())
	if p.topic == h.Topic || p.props == h.Properties {
		t.Fatalf("the plan's target was not rewritten: %+v", p)
	}
	if *h != before {
		t.Fatalf("header changed: %+v, was %+v", *h, before)
	}
}

// One plain send reads its properties once on the send path (the plan) and once in the store's
// append (on a DLedger node, the apply; TestApplyScansPropertiesOnce in fsm counts a replica's):
// two scans in all on the node that takes the send, in classic and in DLedger mode.
func TestPlainSendScansPropertiesTwiceInAll(t *testing.T) {
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
			if n := message.PropertyScans() - before; n != 2 {
				t.Fatalf("one plain send scanned its properties %d times, want 2 (plan, store)", n)
			}
		})
	}
}
