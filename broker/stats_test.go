package broker

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// views is what GET_BROKER_RUNTIME_INFO and a Prometheus scrape say about the traffic.
type views struct {
	put, get      int64   // msgPutTotalTodayNow, msgGetTotalTodayNow
	in, out, dlq  float64 // messages in/out/to the DLQ, summed over every series
	throughputOut float64
}

func readViews(t *testing.T, h *txnHarness) views {
	t.Helper()
	resp := h.invoke(remoting.GetBrokerRuntimeInfo, nil, nil)
	var body struct {
		Table map[string]string `json:"table"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		t.Fatalf("runtime info %q: %v", resp.Body, err)
	}
	var v views
	v.put, _ = strconv.ParseInt(body.Table["msgPutTotalTodayNow"], 10, 64)
	v.get, _ = strconv.ParseInt(body.Table["msgGetTotalTodayNow"], 10, 64)
	for k, x := range gather(t, h.b) {
		switch name := k[:len(k)-len(k[indexOf(k, '{'):])]; name {
		case "rocketmq_messages_in_total":
			v.in += x
		case "rocketmq_messages_out_total":
			v.out += x
		case "rocketmq_throughput_out_total":
			v.throughputOut += x
		case "rocketmq_send_to_dlq_messages_total":
			v.dlq += x
		}
	}
	return v
}

func indexOf(s string, c byte) int {
	for i := range len(s) {
		if s[i] == c {
			return i
		}
	}
	return len(s)
}

// Send, pull, POP and send-back each move the runtime info totals and the Prometheus series by
// the same count: both views read the broker's one set of counters.
func TestCountersFeedBothViews(t *testing.T) {
	h := startTxnBroker(t, txnConfig(t, t.TempDir(), "", 5))
	step := func(what string, op func(), put, get, in, out, dlq int) {
		t.Helper()
		before := readViews(t, h)
		op()
		after := readViews(t, h)
		got := [5]float64{float64(after.put - before.put), float64(after.get - before.get), after.in - before.in, after.out - before.out, after.dlq - before.dlq}
		want := [5]float64{float64(put), float64(get), float64(in), float64(out), float64(dlq)}
		if got != want {
			t.Fatalf("%s moved put/get/in/out/dlq by %v, want %v", what, got, want)
		}
		if out > 0 && after.throughputOut <= before.throughputOut {
			t.Fatalf("%s: throughput out did not move", what)
		}
	}
	send := func() {
		props := message.FormatProperties(map[string]string{message.PropertyTags: "tg", message.PropertyUniqClientMessageID: "U"})
		sh := &protocol.SendMessageRequestHeader{ProducerGroup: "PG", Topic: "T", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4,
			QueueID: 0, BornTimestamp: time.Now().UnixMilli(), Properties: props}
		if resp := h.invoke(remoting.SendMessage, sh.ToExt(), []byte("body")); resp.Code != remoting.Success {
			t.Fatalf("send: %d %s", resp.Code, resp.Remark)
		}
	}
	step("three sends", func() { send(); send(); send() }, 3, 0, 3, 0, 0)

	var phys int64
	step("a pull of three", func() {
		ph := &protocol.PullMessageRequestHeader{ConsumerGroup: "G", Topic: "T", QueueID: 0, QueueOffset: 0, MaxMsgNums: 32,
			SysFlag: protocol.PullSubscription, Subscription: "*"}
		resp := h.invoke(remoting.PullMessage, ph.ToExt(), nil)
		if resp.Code != remoting.Success {
			t.Fatalf("pull: %d %s", resp.Code, resp.Remark)
		}
		m, _, err := message.DecodeRecord(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		phys = m.PhysicalOffset
	}, 0, 3, 0, 3, 0)

	step("a POP of three", func() {
		resp := h.invoke(remoting.PopMessage, map[string]string{"consumerGroup": "G2", "topic": "T", "queueId": "-1",
			"maxMsgNums": "32", "invisibleTime": "60000", "pollTime": "0", "bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10),
			"initMode": "0"}, nil)
		if resp.Code != remoting.Success {
			t.Fatalf("pop: %d %s", resp.Code, resp.Remark)
		}
	}, 0, 3, 0, 3, 0)

	sendBack := func(level int) func() {
		return func() {
			resp := h.invoke(remoting.ConsumerSendMsgBack, map[string]string{"offset": strconv.FormatInt(phys, 10), "group": "G",
				"delayLevel": strconv.Itoa(level), "originMsgId": "x"}, nil)
			if resp.Code != remoting.Success {
				t.Fatalf("send-back: %d %s", resp.Code, resp.Remark)
			}
		}
	}
	step("a send-back for retry", sendBack(1), 1, 0, 1, 0, 0)
	step("a send-back to the DLQ", sendBack(-1), 1, 0, 0, 0, 1)
}
