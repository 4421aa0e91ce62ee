package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"rocketraft/admin"
)

// runAdminCode runs one mqadmin command against c and returns its output and exit status.
func runAdminCode(c *cluster, errOut *strings.Builder, args ...string) (string, int) {
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := admin.Main(ctx, append(append([]string{}, args...), "-n", c.ns.addr), &out, errOut)
	return out.String(), code
}

// sendRowRE matches sendMessage's result row: broker name, queue id, SEND_OK, msgId.
var sendRowRE = regexp.MustCompile(`(?m)^(\S+)\s+(\d+)\s+SEND_OK\s+([0-9A-F]{32})\s*$`)

// TestMqadminMessageAndGroupCommands drives the message and group commands against a live
// broker: sendMessage stores a message the other commands then find (queryMsgByUniqueKey,
// queryMsgByKey, queryMsgByOffset, consumeMessage, which commits nothing); updateSubGroup and
// deleteSubGroup change the broker's group table (GET_ALL_SUBSCRIPTIONGROUP_CONFIG);
// consumerConnection and producerConnection list live Go clients. Unknown or unsupported request
// codes get REQUEST_CODE_NOT_SUPPORTED with a remark naming the request.
func TestMqadminMessageAndGroupCommands(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("AdminMsg")
	runAdmin(t, c, "updateTopic", "-b", c.b.addr, "-t", topic, "-r", "2", "-w", "2")
	waitTopicRoute(t, c, topic)

	out := runAdmin(t, c, "sendMessage", "-t", topic, "-p", "hello from mqadmin", "-k", "admin-key other-key", "-c", "TagA", "-i", "1")
	m := sendRowRE.FindStringSubmatch(out)
	if m == nil || m[1] != c.b.name || m[2] != "1" {
		t.Fatalf("sendMessage output:\n%s", out)
	}
	uniqKey := m[3]
	out = runAdmin(t, c, "queryMsgByUniqueKey", "-t", topic, "-i", uniqKey)
	for _, want := range []string{"hello from mqadmin", "[TagA]", "[admin-key other-key]", uniqKey} {
		if !strings.Contains(out, want) {
			t.Fatalf("queryMsgByUniqueKey lacks %q:\n%s", want, out)
		}
	}
	if out := runAdmin(t, c, "queryMsgByKey", "-t", topic, "-k", "other-key"); !strings.Contains(out, "TagA") {
		t.Fatalf("queryMsgByKey:\n%s", out)
	}
	if out := runAdmin(t, c, "queryMsgByOffset", "-t", topic, "-b", c.b.name, "-i", "1", "--offset", "0"); !strings.Contains(out, "hello from mqadmin") {
		t.Fatalf("queryMsgByOffset:\n%s", out)
	}

	pgroup := uniq("PGAdmin")
	p := newProducer(t, c, producer.WithGroupName(pgroup))
	sendSync(t, p, topic, "more", 6, func(_ int, m *primitive.Message) { m.WithTag("TagB") })
	out = runAdmin(t, c, "consumeMessage", "-t", topic, "-c", "100")
	if n := strings.Count(out, "MSGID: "); n != 7 || !strings.Contains(out, "Consume ok: 7 messages") {
		t.Fatalf("consumeMessage printed %d messages, want 7:\n%s", n, out)
	}
	out = runAdmin(t, c, "consumeMessage", "-t", topic, "-i", "1", "--offset", "0", "-c", "1")
	if !strings.Contains(out, "hello from mqadmin") || strings.Count(out, "MSGID: ") != 1 {
		t.Fatalf("consumeMessage of queue 1 from 0, one message:\n%s", out)
	}
	if tbl, err := allConsumerOffsets(c.b.addr); err != nil || tbl[topic+"@TOOLS_CONSUMER"] != nil {
		t.Errorf("consumeMessage committed offsets: %v %v", tbl[topic+"@TOOLS_CONSUMER"], err)
	}

	group := uniq("GAdminSub")
	out = runAdmin(t, c, "updateSubGroup", "-b", c.b.addr, "-g", group, "-r", "3", "-q", "2", "--consumeMessageOrderly")
	if !strings.Contains(out, "create subscription group to "+c.b.addr+" success.") || !strings.Contains(out, "retryMaxTimes=3") {
		t.Fatalf("updateSubGroup output:\n%s", out)
	}
	groupCfg := func() (map[string]json.RawMessage, error) {
		resp, err := rawRequest(c.b.addr, metaCodeGetAllSubscriptionGroupConfig, nil, nil, 5*time.Second)
		if err != nil {
			return nil, err
		}
		var w struct {
			SubscriptionGroupTable map[string]json.RawMessage `json:"subscriptionGroupTable"`
		}
		err = json.Unmarshal(resp.Body, &w)
		return w.SubscriptionGroupTable, err
	}
	tbl, err := groupCfg()
	if err != nil || !strings.Contains(string(tbl[group]), `"retryMaxTimes":3`) || !strings.Contains(string(tbl[group]), `"consumeMessageOrderly":true`) {
		t.Fatalf("group config after updateSubGroup: %s %v", tbl[group], err)
	}
	out = runAdmin(t, c, "deleteSubGroup", "-c", "DefaultCluster", "-g", group)
	if !strings.Contains(out, "delete subscription group ["+group+"] from broker ["+c.b.addr+"] in cluster [DefaultCluster] success.") {
		t.Fatalf("deleteSubGroup output:\n%s", out)
	}
	if tbl, err := groupCfg(); err != nil || tbl[group] != nil {
		t.Fatalf("group still configured after deleteSubGroup: %v", err)
	}

	cgroup := uniq("GAdminConn")
	pc := startPushConsumer(t, c, cgroup, topic, all)
	eventually(t, 20*time.Second, "consumerConnection lists the live consumer", func() error {
		var errOut strings.Builder
		out, code := runAdminCode(c, &errOut, "consumerConnection", "-g", cgroup)
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errOut.String())
		}
		for _, want := range []string{"GO", "Below is subscription:", "Topic: " + topic, "ConsumeType: CONSUME_PASSIVELY", "MessageModel: CLUSTERING"} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		return nil
	})
	pc.shutdown()
	eventually(t, 20*time.Second, "producerConnection lists the live producer (after its first heartbeat)", func() error {
		var errOut strings.Builder
		out, code := runAdminCode(c, &errOut, "producerConnection", "-g", pgroup, "-t", topic)
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errOut.String())
		}
		if !strings.Contains(out, "0001  ") || !strings.Contains(out, "GO") {
			return fmt.Errorf("output:\n%s", out)
		}
		return nil
	})

	for _, code := range []int{47, 324, 200052, 4242} { // 25 and 26 are served (allow-listed keys, acl_test.go; mqadmin_ops_test.go); 200050 is POP
		resp, err := rawRequest(c.b.addr, code, nil, nil, 5*time.Second)
		if err != nil || resp.Code != 3 {
			t.Errorf("request code %d: %v %+v; want REQUEST_CODE_NOT_SUPPORTED (3)", code, err, resp)
			continue
		}
		if code != 4242 && !strings.Contains(resp.Remark, fmt.Sprintf("request code %d ", code)) {
			t.Errorf("request code %d: remark %q does not name it", code, resp.Remark)
		}
	}
}
