package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestMqadminTraceAndTraffic: what an operator asks mqadmin daily, against a real broker. A
// group consumes the first messages and stops; one more message is sent. queryMsgById shows
// where each message was stored and that the group consumed the first (CONSUMED) and not the
// second (NOT_ONLINE, not consumed yet); consumerProgress shows the lag in time of the
// unconsumed one; statsAll shows the topic's traffic in the last minute; consumerConnection
// names the broker the consumer is connected to.
func TestMqadminTraceAndTraffic(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic, group := uniq("TraceTopic"), uniq("GTrace")
	p := newProducer(t, c)
	first := sendSync(t, p, topic, "trace", 3, nil)
	pc := startPushConsumer(t, c, group, topic, all)
	eventually(t, 30*time.Second, "consumer receives all", func() error { return countErr("push consumer", pc.got.count(), len(first)) })
	eventually(t, 20*time.Second, "consumerConnection names the broker (once the retry topic is routed)", func() error {
		var errOut strings.Builder
		out, code := runAdminCode(c, &errOut, "consumerConnection", "-g", group)
		if code != 0 || !strings.Contains(out, "broker "+c.b.addr) {
			return fmt.Errorf("exit %d, no \"broker %s\":\n%s%s", code, c.b.addr, out, errOut.String())
		}
		return nil
	})
	eventually(t, 20*time.Second, "offsets committed", func() error {
		var cp struct {
			DiffTotal int64 `json:"diffTotal"`
		}
		if err := json.Unmarshal([]byte(runAdmin(t, c, "consumerProgress", "-g", group, "-t", topic, "-o", "json")), &cp); err != nil {
			return err
		}
		if cp.DiffTotal != 0 {
			return fmt.Errorf("diff total %d", cp.DiffTotal)
		}
		return nil
	})
	pc.shutdown()
	late := sendSync(t, p, topic, "late", 1, nil)[0]

	out := runAdmin(t, c, "queryMsgById", "-i", first[0].offsetMsgID)
	for _, want := range []string{"Stored At:", "broker " + c.b.name, "MessageTrack [consumerGroup=" + group + ", trackType="} {
		if !strings.Contains(out, want) {
			t.Fatalf("queryMsgById of a consumed message lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, ": consumed)") {
		t.Fatalf("queryMsgById does not say the group consumed the message:\n%s", out)
	}
	var tr struct {
		BrokerName string `json:"brokerName"`
		Tracks     []struct {
			ConsumerGroup string `json:"consumerGroup"`
			TrackType     string `json:"trackType"`
			Consumed      bool   `json:"consumed"`
		} `json:"tracks"`
	}
	eventually(t, 20*time.Second, "the group is offline for the broker", func() error {
		if err := json.Unmarshal([]byte(runAdmin(t, c, "queryMsgById", "-i", late.offsetMsgID, "-o", "json")), &tr); err != nil {
			return err
		}
		if tr.BrokerName != c.b.name || len(tr.Tracks) != 1 || tr.Tracks[0].ConsumerGroup != group ||
			tr.Tracks[0].TrackType != "NOT_ONLINE" || tr.Tracks[0].Consumed {
			return fmt.Errorf("trace of the late message: %+v", tr)
		}
		return nil
	})

	time.Sleep(1500 * time.Millisecond) // the late message ages
	var cp struct {
		DiffTotal int64 `json:"diffTotal"`
		LagTimeMs int64 `json:"lagTimeMs"`
	}
	if err := json.Unmarshal([]byte(runAdmin(t, c, "consumerProgress", "-g", group, "-t", topic, "-o", "json")), &cp); err != nil {
		t.Fatal(err)
	}
	if cp.DiffTotal != 1 || cp.LagTimeMs < 1000 || cp.LagTimeMs > 5*60*1000 {
		t.Fatalf("consumerProgress: diff %d, lag time %d ms", cp.DiffTotal, cp.LagTimeMs)
	}
	if out := runAdmin(t, c, "consumerProgress", "-g", group, "-t", topic); !strings.Contains(out, "Lag Time: ") || strings.Contains(out, "Lag Time: unknown") {
		t.Fatalf("consumerProgress text lacks the lag time:\n%s", out)
	}

	var rows []struct {
		Topic         string  `json:"topic"`
		ConsumerGroup string  `json:"consumerGroup"`
		Accumulation  int64   `json:"accumulation"`
		InTPS         float64 `json:"inTps"`
		InMsg24Hour   int64   `json:"inMsg24Hour"`
		OutMsg24Hour  int64   `json:"outMsg24Hour"`
	}
	// The broker samples every 2 s: the sends show once a sample after them was taken.
	eventually(t, 15*time.Second, "statsAll shows the topic's traffic", func() error {
		if err := json.Unmarshal([]byte(runAdmin(t, c, "statsAll", "-t", topic, "-o", "json")), &rows); err != nil {
			return err
		}
		if len(rows) != 1 || rows[0].ConsumerGroup != group || rows[0].InMsg24Hour != 4 || rows[0].InTPS <= 0 ||
			rows[0].Accumulation != 1 || rows[0].OutMsg24Hour != 3 {
			return fmt.Errorf("statsAll rows %+v", rows)
		}
		return nil
	})
	if out := runAdmin(t, c, "statsAll", "-a"); !strings.Contains(out, topic) || !strings.Contains(out, "#InTPS") {
		t.Fatalf("statsAll -a lacks %s:\n%s", topic, out)
	}
}
