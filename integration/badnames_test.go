package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Request codes of the name checks (remoting/code.go).
const (
	namesCodeUpdateConsumerOffset = 15
	namesCodeUpdateTopic          = 17
	namesCodeGetAllTopicConfig    = 21
	namesCodeHeartbeat            = 34
	namesCodeSendBack             = 36
	namesCodeLockBatch            = 41
	namesCodeUnlockBatch          = 42
	namesCodeGetAllOffsets        = 43
	namesCodeUpdateGroup          = 200
	namesCodeGetAllGroups         = 201
	namesCodeAllTopicsFromNamesrv = 206
	namesCodeResetOffset          = 222
	namesCodePop                  = 200050
	namesCodeAck                  = 200051
	namesCodeChangeInvisible      = 200053
	namesCodeBatchAck             = 200151
	namesInvalidParameter         = 29
)

// validNameRE is RocketMQ's rule for topic and group names (message/validate.go), restated here
// so the test does not share the code it checks.
var validNameRE = regexp.MustCompile(`^[%|a-zA-Z0-9_-]{1,255}$`)

// TestBadNamesRefusedOnEveryPath replays the names of the security review's findings — a path
// (`../../tmp/x`), a NUL, a 10 KB name and `%RETRY%../../..` — on every request that records a
// group or topic name: HEARTBEAT (consumer group, subscribed topic, producer group),
// UPDATE/QUERY_CONSUMER_OFFSET, CONSUMER_SEND_MSG_BACK, a send that would auto-create the topic,
// PULL, POP/ACK/CHANGE_INVISIBLE/BATCH_ACK, LOCK/UNLOCK_BATCH_MQ, the offset reset and the two
// admin commands. Each must be answered INVALID_PARAMETER (29). Then nothing may have been
// stored: every name in the broker's topic, group and offset tables (as served, and as written
// to topics.json / subscriptionGroup.json / consumerOffset.json after a clean stop) and in the
// name server's topic list is a valid name, and no file was created outside the store. Also: one
// heartbeat creates at most 64 new subscription groups.
func TestBadNamesRefusedOnEveryPath(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	addr := c.b.addr
	const topic, group = "BadNamesTopic", "BadNamesGroup"
	if resp, err := sendRaw(addr, topic, 0, []byte("x"), props("TAGS", "A")); err != nil || resp.Code != respSuccess {
		t.Fatalf("send to a valid topic: %v %+v", err, resp)
	}

	bad := map[string]string{
		"path":     "../../tmp/x",
		"nul":      "bad\x00name",
		"10KB":     strings.Repeat("n", 10<<10),
		"retryDot": "%RETRY%../../..",
	}
	heartbeat := func(producer, consumer, sub string) []byte {
		b, _ := json.Marshal(map[string]any{
			"clientID":        "127.0.0.1@badnames",
			"producerDataSet": []map[string]any{{"groupName": producer}},
			"consumerDataSet": []map[string]any{{
				"groupName": consumer, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
				"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": false,
				"subscriptionDataSet": []map[string]any{{"topic": sub, "subString": "*", "expressionType": "TAG",
					"tagsSet": []string{}, "codeSet": []string{}, "subVersion": 0, "classFilterMode": false}},
			}},
		})
		return b
	}
	lockBody := func(g, tp string) []byte {
		b, _ := json.Marshal(map[string]any{"consumerGroup": g, "clientId": "127.0.0.1@badnames",
			"mqSet": []map[string]any{{"topic": tp, "brokerName": c.b.name, "queueId": 0}}})
		return b
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	type path struct {
		name string
		code int
		req  func(n string) (map[string]string, []byte)
	}
	paths := []path{
		{"heartbeat_consumer_group", namesCodeHeartbeat, func(n string) (map[string]string, []byte) {
			return nil, heartbeat("PG", n, topic)
		}},
		{"heartbeat_subscription_topic", namesCodeHeartbeat, func(n string) (map[string]string, []byte) {
			return nil, heartbeat("PG", group, n)
		}},
		{"heartbeat_producer_group", namesCodeHeartbeat, func(n string) (map[string]string, []byte) {
			return nil, heartbeat(n, group, topic)
		}},
		{"update_offset_group", namesCodeUpdateConsumerOffset, func(n string) (map[string]string, []byte) {
			return map[string]string{"consumerGroup": n, "topic": topic, "queueId": "0", "commitOffset": "1"}, nil
		}},
		{"update_offset_topic", namesCodeUpdateConsumerOffset, func(n string) (map[string]string, []byte) {
			return map[string]string{"consumerGroup": group, "topic": n, "queueId": "0", "commitOffset": "1"}, nil
		}},
		{"query_offset_group", codeQueryConsumerOffset, func(n string) (map[string]string, []byte) {
			return map[string]string{"consumerGroup": n, "topic": topic, "queueId": "0"}, nil
		}},
		{"send_back_group", namesCodeSendBack, func(n string) (map[string]string, []byte) {
			return map[string]string{"offset": "0", "group": n, "delayLevel": "0", "originMsgId": "x", "originTopic": topic}, nil
		}},
		{"send_auto_create_topic", codeSendMessage, func(n string) (map[string]string, []byte) {
			return map[string]string{"producerGroup": "PG", "topic": n, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
				"queueId": "0", "sysFlag": "0", "bornTimestamp": now, "flag": "0", "properties": "", "reconsumeTimes": "0",
				"unitMode": "false", "batch": "false"}, []byte("x")
		}},
		{"pull_group", codePullMessage, func(n string) (map[string]string, []byte) {
			return map[string]string{"consumerGroup": n, "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
				"sysFlag": "3", "commitOffset": "1", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG"}, nil
		}},
		{"pop_group", namesCodePop, func(n string) (map[string]string, []byte) {
			return map[string]string{"consumerGroup": n, "topic": topic, "queueId": "-1", "maxMsgNums": "1", "invisibleTime": "60000",
				"pollTime": "0", "bornTime": now, "initMode": "0"}, nil
		}},
		{"pop_topic", namesCodePop, func(n string) (map[string]string, []byte) {
			return map[string]string{"consumerGroup": group, "topic": n, "queueId": "-1", "maxMsgNums": "1", "invisibleTime": "60000",
				"pollTime": "0", "bornTime": now, "initMode": "0"}, nil
		}},
		{"ack_group", namesCodeAck, func(n string) (map[string]string, []byte) {
			return map[string]string{"consumerGroup": n, "topic": topic, "queueId": "0", "offset": "0", "extraInfo": "0 0 60000 0 0 b 0 0"}, nil
		}},
		{"change_invisible_topic", namesCodeChangeInvisible, func(n string) (map[string]string, []byte) {
			return map[string]string{"consumerGroup": group, "topic": n, "queueId": "0", "offset": "0", "invisibleTime": "1000",
				"extraInfo": "0 0 60000 0 0 b 0 0"}, nil
		}},
		{"batch_ack_group", namesCodeBatchAck, func(n string) (map[string]string, []byte) {
			b, _ := json.Marshal(map[string]any{"acks": []map[string]any{{"c": n, "t": topic, "so": 0, "q": 0, "rq": 0, "pt": 0, "it": 0}}})
			return nil, b
		}},
		{"lock_group", namesCodeLockBatch, func(n string) (map[string]string, []byte) { return nil, lockBody(n, topic) }},
		{"lock_topic", namesCodeLockBatch, func(n string) (map[string]string, []byte) { return nil, lockBody(group, n) }},
		{"unlock_group", namesCodeUnlockBatch, func(n string) (map[string]string, []byte) { return nil, lockBody(n, topic) }},
		{"reset_offset_group", namesCodeResetOffset, func(n string) (map[string]string, []byte) {
			return map[string]string{"topic": topic, "group": n, "timestamp": "-1", "isForce": "true"}, nil
		}},
		{"admin_update_topic", namesCodeUpdateTopic, func(n string) (map[string]string, []byte) {
			return map[string]string{"topic": n, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}, nil
		}},
		{"admin_update_group", namesCodeUpdateGroup, func(n string) (map[string]string, []byte) {
			b, _ := json.Marshal(map[string]any{"groupName": n, "consumeEnable": true, "retryQueueNums": 1, "retryMaxTimes": 16})
			return nil, b
		}},
	}
	for _, p := range paths {
		for kind, n := range bad {
			ext, body := p.req(n)
			resp, err := rawRequest(addr, p.code, ext, body, 10*time.Second)
			if err != nil {
				t.Fatalf("%s with the %s name: %v", p.name, kind, err)
			}
			if resp.Code != namesInvalidParameter {
				t.Errorf("%s with the %s name: code %d %q, want %d INVALID_PARAMETER", p.name, kind, resp.Code, resp.Remark, namesInvalidParameter)
			} else if kind == "path" {
				t.Logf("%s: %d %q", p.name, resp.Code, resp.Remark)
			}
		}
	}

	// A valid heartbeat and offset commit, so the group and offset tables have entries to check
	// and the files exist.
	if resp, err := rawRequest(addr, namesCodeHeartbeat, nil, heartbeat("PG", group, topic), 10*time.Second); err != nil || resp.Code != respSuccess {
		t.Fatalf("valid heartbeat: %v %+v", err, resp)
	}
	if resp, err := rawRequest(addr, namesCodeUpdateConsumerOffset, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "1"}, nil, 10*time.Second); err != nil || resp.Code != respSuccess {
		t.Fatalf("valid offset commit: %v %+v", err, resp)
	}
	if groups := mustTableKeys(t, addr, namesCodeGetAllGroups, "subscriptionGroupTable"); !slices.Contains(groups, group) {
		t.Fatalf("the valid heartbeat did not create group %s: %v", group, groups)
	}

	// One heartbeat naming 100 new consumer groups creates 64 of them (the per-heartbeat cap);
	// the next creates the rest.
	manyHB := func() []byte {
		var cds []map[string]any
		for i := 0; i < 100; i++ {
			cds = append(cds, map[string]any{"groupName": fmt.Sprintf("ManyGroups_%03d", i), "consumeType": "CONSUME_PASSIVELY",
				"messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": []any{}})
		}
		b, _ := json.Marshal(map[string]any{"clientID": "127.0.0.1@many", "consumerDataSet": cds})
		return b
	}()
	for round, want := range []int{64, 100} {
		if resp, err := rawRequest(addr, namesCodeHeartbeat, nil, manyHB, 30*time.Second); err != nil || resp.Code != respSuccess {
			t.Fatalf("heartbeat naming 100 groups: %v %+v", err, resp)
		}
		if n := countPrefixed(mustTableKeys(t, addr, namesCodeGetAllGroups, "subscriptionGroupTable"), "ManyGroups_"); n != want {
			t.Fatalf("after heartbeat %d naming 100 new groups: %d created, want %d", round+1, n, want)
		}
	}

	// The tables as served.
	assertValidNames(t, "topic table", mustTableKeys(t, addr, namesCodeGetAllTopicConfig, "topicConfigTable"))
	assertValidNames(t, "subscription group table", mustTableKeys(t, addr, namesCodeGetAllGroups, "subscriptionGroupTable"))
	assertValidNames(t, "consumer offset table", offsetKeyNames(mustTableKeys(t, addr, namesCodeGetAllOffsets, "offsetTable")))
	resp, err := rawRequest(c.ns.addr, namesCodeAllTopicsFromNamesrv, nil, nil, 5*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("GET_ALL_TOPIC_LIST_FROM_NAMESERVER: %v %+v", err, resp)
	}
	var list struct {
		TopicList []string `json:"topicList"`
	}
	if err := json.Unmarshal(resp.Body, &list); err != nil {
		t.Fatalf("topic list: %v", err)
	}
	assertValidNames(t, "name server topic list", list.TopicList)

	// The files, after a clean stop (which persists the offsets).
	if !c.b.signalAndWait(syscall.SIGTERM, 60*time.Second) {
		t.Fatalf("broker did not stop")
	}
	cfg := filepath.Join(c.b.storeRoot, "config")
	for file, table := range map[string]string{"topics.json": "topicConfigTable", "subscriptionGroup.json": "subscriptionGroupTable", "consumerOffset.json": "offsetTable"} {
		data, err := os.ReadFile(filepath.Join(cfg, file))
		if err != nil {
			t.Fatalf("read %s: %v", file, err)
		}
		keys := jsonTableKeys(t, file, data, table)
		if file == "consumerOffset.json" {
			keys = offsetKeyNames(keys)
		}
		assertValidNames(t, file, keys)
	}
	// Nothing outside the store: the broker's directory holds only what the harness put there,
	// and `../../tmp/x` resolved from the store, its config/ or consumequeue/ does not exist.
	dir := filepath.Dir(c.b.storeRoot)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := e.Name(); n != "store" && n != "broker.properties" && !strings.HasPrefix(n, "mqbroker-") {
			t.Errorf("unexpected entry %q next to the store", n)
		}
	}
	for _, base := range []string{c.b.storeRoot, cfg, filepath.Join(c.b.storeRoot, "consumequeue")} {
		if _, err := os.Stat(filepath.Join(base, "../../tmp/x")); err == nil {
			t.Errorf("%s exists", filepath.Join(base, "../../tmp/x"))
		}
	}
}

// mustTableKeys asks the broker for one of its tables and returns the table's keys.
func mustTableKeys(t *testing.T, addr string, code int, table string) []string {
	t.Helper()
	resp, err := rawRequest(addr, code, nil, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("request %d: %v %+v", code, err, resp)
	}
	return jsonTableKeys(t, fmt.Sprintf("answer to %d", code), resp.Body, table)
}

func jsonTableKeys(t *testing.T, what string, data []byte, table string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(m[table], &inner); err != nil {
		t.Fatalf("%s: %s: %v", what, table, err)
	}
	keys := make([]string, 0, len(inner))
	for k := range inner {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// offsetKeyNames splits consumer offset keys (topic@group) into their names.
func offsetKeyNames(keys []string) []string {
	var out []string
	for _, k := range keys {
		tp, g, _ := strings.Cut(k, "@")
		out = append(out, tp, g)
	}
	return out
}

func assertValidNames(t *testing.T, what string, names []string) {
	t.Helper()
	for _, n := range names {
		if !validNameRE.MatchString(n) {
			t.Errorf("%s holds an invalid name %.60q (%d bytes)", what, n, len(n))
		}
	}
	t.Logf("%s: %d names, all valid", what, len(names))
}
