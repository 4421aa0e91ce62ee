package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestMqadminTopicTypeAndOrderlyGroup: updateTopic -a sets the topic attribute message.type,
// which topicStatus and topicList -c show; an update without -a keeps it, +/- change and delete
// it, and bad modifications (unknown value or key, no sign) get a clear error. updateSubGroup's
// Java spellings of the orderly flag (--consumeMessageOrderly true, =false, -o true) are stored.
func TestMqadminTopicTypeAndOrderlyGroup(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic := uniq("AdminFifo")
	runAdmin(t, c, "updateTopic", "-b", c.b.addr, "-t", topic, "-r", "2", "-w", "2", "-a", "+message.type=FIFO")
	msgType := func() string {
		t.Helper()
		resp, err := rawRequest(c.b.addr, fifoCodeGetTopicConfig, map[string]string{"topic": topic}, nil, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var tc struct {
			Attributes map[string]string `json:"attributes"`
		}
		if err := json.Unmarshal(resp.Body, &tc); err != nil {
			t.Fatalf("topic config %s: %v", resp.Body, err)
		}
		return tc.Attributes["message.type"]
	}
	if got := msgType(); got != "FIFO" {
		t.Fatalf("message.type %q after -a +message.type=FIFO", got)
	}
	eventually(t, 15*time.Second, "route of the new topic", func() error {
		_, err := queueCount(c.ns.addr, topic)
		return err
	})
	if out := runAdmin(t, c, "topicStatus", "-t", topic); !strings.Contains(out, "#Message Type: FIFO") {
		t.Fatalf("topicStatus output:\n%s", out)
	}
	if out := runAdmin(t, c, "topicStatus", "-t", topic, "-o", "json"); !strings.Contains(out, `"messageType": "FIFO"`) {
		t.Fatalf("topicStatus json:\n%s", out)
	}
	found := false
	for _, line := range strings.Split(runAdmin(t, c, "topicList", "-c"), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == topic {
			found = f[2] == "FIFO"
		}
	}
	if !found {
		t.Fatal("topicList -c does not show the topic as FIFO")
	}

	runAdmin(t, c, "updateTopic", "-b", c.b.addr, "-t", topic, "-r", "2", "-w", "2")
	if got := msgType(); got != "FIFO" {
		t.Fatalf("message.type %q after an update without -a, want FIFO kept", got)
	}
	runAdmin(t, c, "updateTopic", "-b", c.b.addr, "-t", topic, "-r", "2", "-w", "2", "-a", "+message.type=MIXED")
	if got := msgType(); got != "MIXED" {
		t.Fatalf("message.type %q, want MIXED", got)
	}
	for _, bad := range []struct{ attrs, want string }{
		{"+message.type=ORDERED", `value "ORDERED" is not one of`},
		{"+queue.type=BatchCQ", "unsupported attribute key: queue.type"},
		{"message.type=FIFO", "want +key=value or -key"},
	} {
		var errOut strings.Builder
		_, code := runAdminCode(c, &errOut, "updateTopic", "-b", c.b.addr, "-t", topic, "-r", "2", "-w", "2", "-a", bad.attrs)
		if code != 1 || !strings.Contains(errOut.String(), bad.want) {
			t.Fatalf("-a %s: exit %d, stderr %s", bad.attrs, code, errOut.String())
		}
	}
	if got := msgType(); got != "MIXED" {
		t.Fatalf("message.type %q after refused changes, want MIXED", got)
	}
	runAdmin(t, c, "updateTopic", "-b", c.b.addr, "-t", topic, "-r", "2", "-w", "2", "-a", "-message.type")
	if got := msgType(); got != "" {
		t.Fatalf("message.type %q after -message.type", got)
	}

	group := uniq("GAdminOrderly")
	orderly := func() bool {
		t.Helper()
		resp, err := rawRequest(c.b.addr, fifoCodeGetGroupConfig, map[string]string{"group": group}, nil, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var gc struct {
			ConsumeMessageOrderly bool `json:"consumeMessageOrderly"`
		}
		if err := json.Unmarshal(resp.Body, &gc); err != nil {
			t.Fatalf("group config %s: %v", resp.Body, err)
		}
		return gc.ConsumeMessageOrderly
	}
	for _, step := range []struct {
		args []string
		want bool
	}{
		{[]string{"--consumeMessageOrderly", "true"}, true},
		{[]string{"--consumeMessageOrderly=false"}, false},
		{[]string{"-o", "true"}, true},
		{nil, false},
		{[]string{"--consumeMessageOrderly"}, true},
	} {
		runAdmin(t, c, append([]string{"updateSubGroup", "-b", c.b.addr, "-g", group}, step.args...)...)
		if got := orderly(); got != step.want {
			t.Fatalf("updateSubGroup %v: consumeMessageOrderly %v, want %v", step.args, got, step.want)
		}
	}
}
