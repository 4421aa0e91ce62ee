package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"rocketraft/admin"
)

// runAdmin runs one mqadmin command in-process against the test cluster and
// returns its standard output, failing the test on a non-zero exit.
func runAdmin(t *testing.T, c *cluster, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append(append([]string{}, args...), "-n", c.ns.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if code := admin.Main(ctx, full, &out, &errOut); code != 0 {
		t.Fatalf("mqadmin %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	return out.String()
}

// TestMqadminAgainstRealBroker drives every mqadmin command of the foundation
// issue against a running name server and broker and checks what it prints
// against what the test did: topic creation and routes, offsets after sends,
// consumer lag after a commit, cluster and broker figures, message lookups and
// topic deletion.
func TestMqadminAgainstRealBroker(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("AdminTopic")

	out := runAdmin(t, c, "updateTopic", "-b", c.b.addr, "-t", topic, "-r", "3", "-w", "3")
	if !strings.Contains(out, "create topic to "+c.b.addr+" success.") || !strings.Contains(out, "readQueueNums=3") {
		t.Fatalf("updateTopic output:\n%s", out)
	}
	eventually(t, 15*time.Second, "route of the new topic", func() error {
		n, err := queueCount(c.ns.addr, topic)
		if err != nil {
			return err
		}
		if n != 3 {
			return fmt.Errorf("route has %d queues, want 3", n)
		}
		return nil
	})
	if out := runAdmin(t, c, "topicRoute", "-t", topic); !strings.Contains(out, c.b.addr) || !strings.Contains(out, "RW") {
		t.Fatalf("topicRoute output:\n%s", out)
	}
	if out := runAdmin(t, c, "topicList"); !strings.Contains(out, topic) {
		t.Fatalf("topicList lacks %s:\n%s", topic, out)
	}

	p := newProducer(t, c)
	sends := sendSync(t, p, topic, "adm", 30, func(i int, m *primitive.Message) { m.WithKeys([]string{fmt.Sprintf("key-%d", i)}) })

	var status []struct {
		QueueID   int32 `json:"queueId"`
		MaxOffset int64 `json:"maxOffset"`
	}
	raw := runAdmin(t, c, "topicStatus", "-t", topic, "-o", "json")
	if err := json.Unmarshal([]byte(raw), &status); err != nil {
		t.Fatalf("topicStatus json: %v\n%s", err, raw)
	}
	var total int64
	for _, s := range status {
		total += s.MaxOffset
	}
	if len(status) != 3 || total != 30 {
		t.Fatalf("topicStatus: %d queues with %d messages, want 3 and 30:\n%s", len(status), total, raw)
	}

	group := uniq("AdminGroup")
	if resp, err := rawRequest(c.b.addr, 15, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "4"}, nil, 5*time.Second); err != nil || resp.Code != 0 {
		t.Fatalf("UPDATE_CONSUMER_OFFSET: %v %+v", err, resp)
	}
	out = runAdmin(t, c, "consumerProgress", "-g", group, "-t", topic)
	if !strings.Contains(out, "Diff Total: 26") {
		t.Fatalf("consumerProgress should show 30-4=26 behind:\n%s", out)
	}

	if out := runAdmin(t, c, "clusterList"); !strings.Contains(out, c.b.name) || !strings.Contains(out, c.b.addr) {
		t.Fatalf("clusterList output:\n%s", out)
	}
	out = runAdmin(t, c, "brokerStatus", "-b", c.b.addr)
	if !strings.Contains(out, "commitLogMaxOffset") || !strings.Contains(out, "msgPutTotalTodayNow") {
		t.Fatalf("brokerStatus output:\n%s", out)
	}

	if out := runAdmin(t, c, "queryMsgByKey", "-t", topic, "-k", "key-7"); !strings.Contains(out, sends[7].offsetMsgID) {
		t.Fatalf("queryMsgByKey key-7 should list %s:\n%s", sends[7].offsetMsgID, out)
	}
	if out := runAdmin(t, c, "queryMsgById", "-i", sends[3].offsetMsgID); !strings.Contains(out, "adm-3") || !strings.Contains(out, topic) {
		t.Fatalf("queryMsgById should show body adm-3:\n%s", out)
	}

	out = runAdmin(t, c, "deleteTopic", "-c", "DefaultCluster", "-t", topic)
	if !strings.Contains(out, "success") {
		t.Fatalf("deleteTopic output:\n%s", out)
	}
	eventually(t, 15*time.Second, "route gone after deleteTopic", func() error {
		if _, err := queueCount(c.ns.addr, topic); err == nil {
			return fmt.Errorf("topic %s still routed", topic)
		}
		return nil
	})
	if mo, err := maxOffset(c.b.addr, topic, 0); err != nil || mo != 0 {
		t.Fatalf("after deleteTopic queue 0 max offset = %d, %v; want 0", mo, err)
	}
}
