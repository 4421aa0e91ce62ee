package integration

// POP consumption (POP_MESSAGE 200050, ACK_MESSAGE 200051, CHANGE_MESSAGE_INVISIBLETIME 200053)
// driven with raw requests: no stock Go client speaks POP.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	codePopMessage          = 200050
	codeAckMessage          = 200051
	codeChangeInvisibleTime = 200053
	respInvalidParameter    = 29
	respNoMessage           = 208
	respPollingTimeout      = 210
)

// popResult is one POP_MESSAGE answer.
type popResult struct {
	code    int
	remark  string
	ext     map[string]string
	records []*record
}

func popRaw(addr, group, topic string, qid, maxNums int, invisible, pollTime time.Duration, exp string) (*popResult, error) {
	ext := map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(qid), "maxMsgNums": strconv.Itoa(maxNums),
		"invisibleTime": strconv.FormatInt(invisible.Milliseconds(), 10), "pollTime": strconv.FormatInt(pollTime.Milliseconds(), 10),
		"bornTime": strconv.FormatInt(time.Now().UnixMilli(), 10), "initMode": "0", "expType": "TAG", "exp": exp, "order": "false",
	}
	resp, err := rawRequest(addr, codePopMessage, ext, nil, pollTime+10*time.Second)
	if err != nil {
		return nil, err
	}
	out := &popResult{code: resp.Code, remark: resp.Remark, ext: resp.ExtFields}
	if resp.Code == respSuccess {
		if out.records, err = parseRecords(resp.Body); err != nil {
			return nil, fmt.Errorf("pop body: %w", err)
		}
	}
	return out, nil
}

func popAckRaw(addr, group string, r *record) (*remotingCmd, error) {
	return rawRequest(addr, codeAckMessage, map[string]string{
		"consumerGroup": group, "topic": r.Topic, "queueId": strconv.Itoa(int(r.QueueID)),
		"extraInfo": r.Properties["POP_CK"], "offset": strconv.FormatInt(r.QueueOffset, 10),
	}, nil, 10*time.Second)
}

func popChangeRaw(addr, group string, r *record, invisible time.Duration) (*remotingCmd, error) {
	return rawRequest(addr, codeChangeInvisibleTime, map[string]string{
		"consumerGroup": group, "topic": r.Topic, "queueId": strconv.Itoa(int(r.QueueID)),
		"extraInfo": r.Properties["POP_CK"], "offset": strconv.FormatInt(r.QueueOffset, 10),
		"invisibleTime": strconv.FormatInt(invisible.Milliseconds(), 10),
	}, nil, 10*time.Second)
}

func popBodies(recs []*record) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, string(r.Body))
	}
	slices.Sort(out)
	return out
}

func mustAck(t testing.TB, addr, group string, r *record) {
	t.Helper()
	resp, err := popAckRaw(addr, group, r)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("ack %s: %v %+v", r.Body, err, resp)
	}
}

// popUntil pops (long polling) until want distinct bodies were received or timeout; it fails
// on a body outside allowed. It returns the records received.
func popUntil(t testing.TB, addr, group, topic string, want int, allowed []string, invisible, timeout time.Duration) []*record {
	t.Helper()
	var got []*record
	seen := map[string]bool{}
	deadline := time.Now().Add(timeout)
	for len(seen) < want {
		if time.Now().After(deadline) {
			t.Fatalf("popped %v, want %d of %v within %v", popBodies(got), want, allowed, timeout)
		}
		res, err := popRaw(addr, group, topic, -1, 32, invisible, time.Second, "*")
		if err != nil {
			t.Fatalf("pop: %v", err)
		}
		if res.code != respSuccess {
			if res.code != respPullNotFound {
				t.Fatalf("pop: code %d %q", res.code, res.remark)
			}
			continue
		}
		for _, r := range res.records {
			if !slices.Contains(allowed, string(r.Body)) {
				t.Fatalf("popped %q, which must not come back (allowed %v)", r.Body, allowed)
			}
			seen[string(r.Body)] = true
			got = append(got, r)
		}
	}
	return got
}

// TestPopClassic: pop N, ack some, change one's invisible time; after the invisible time
// exactly the un-acked ones come back (the changed one later); tag filter; long polling; bad
// input answered with codes.
func TestPopClassic(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	topic, group := uniq("Pop"), uniq("CG_POP")
	createTopic(t, c, topic, 2)
	var all []string
	for i := range 10 {
		body := fmt.Sprintf("m%d", i)
		all = append(all, body)
		tag := "TagA"
		if i%2 == 1 {
			tag = "TagB"
		}
		resp, err := sendRaw(c.b.addr, topic, i%2, []byte(body), props("TAGS", tag))
		if err != nil || resp.Code != respSuccess {
			t.Fatalf("send %s: %v %+v", body, err, resp)
		}
	}
	const invisible = 2 * time.Second
	// The broker stamps popTime while it handles the request: from just before sending it is
	// the earliest the invisible time can end (measuring from the answer was ~10 ms late).
	popped := time.Now()
	res, err := popRaw(c.b.addr, group, topic, -1, 32, invisible, 0, "*")
	if err != nil || res.code != respSuccess {
		t.Fatalf("first pop: %v %+v", err, res)
	}
	if got := popBodies(res.records); !slices.Equal(got, all) {
		t.Fatalf("first pop got %v, want %v", got, all)
	}
	for _, k := range []string{"popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo", "msgOffsetInfo"} {
		if _, ok := res.ext[k]; !ok {
			t.Errorf("pop response lacks header %s: %v", k, res.ext)
		}
	}
	if res.ext["invisibleTime"] != "2000" || !strings.Contains(res.ext["msgOffsetInfo"], "0 0 0,1,2,3,4") {
		t.Errorf("pop header %v", res.ext)
	}
	for _, r := range res.records {
		if f := strings.Fields(r.Properties["POP_CK"]); len(f) != 8 || f[1] != res.ext["popTime"] || f[7] != strconv.FormatInt(r.QueueOffset, 10) {
			t.Fatalf("POP_CK of %s: %q (popTime %s)", r.Body, r.Properties["POP_CK"], res.ext["popTime"])
		}
	}
	if again, err := popRaw(c.b.addr, group, topic, -1, 32, invisible, 0, "*"); err != nil || again.code != respPullNotFound {
		t.Fatalf("second pop while all are invisible: %v %+v", err, again)
	}

	byBody := map[string]*record{}
	for _, r := range res.records {
		byBody[string(r.Body)] = r
	}
	for _, b := range []string{"m0", "m2", "m3", "m6", "m9"} {
		mustAck(t, c.b.addr, group, byBody[b])
	}
	mustAck(t, c.b.addr, group, byBody["m0"]) // again: idempotent
	resp, err := popChangeRaw(c.b.addr, group, byBody["m1"], 6*time.Second)
	if err != nil || resp.Code != respSuccess || resp.ExtFields["invisibleTime"] != "6000" || resp.ExtFields["popTime"] == "" {
		t.Fatalf("change invisible time: %v %+v", err, resp)
	}
	// Bad input: clear codes, no crash.
	bad := *byBody["m4"]
	bad.Properties = map[string]string{"POP_CK": "garbage"}
	if resp, err := popAckRaw(c.b.addr, group, &bad); err != nil || resp.Code != respMessageIllegal {
		t.Fatalf("ack with bad extraInfo: %v %+v", err, resp)
	}
	if resp, err := popChangeRaw(c.b.addr, group, byBody["m2"], time.Second); err != nil || resp.Code != respNoMessage {
		t.Fatalf("change of an acked message: %v %+v", err, resp)
	}
	if res, err := popRaw(c.b.addr, group, topic, -1, 0, invisible, 0, "*"); err != nil || res.code != respInvalidParameter {
		t.Fatalf("pop with maxMsgNums 0: %v %+v", err, res)
	}
	if res, err := popRaw(c.b.addr, group, topic, 7, 1, invisible, 0, "*"); err != nil || res.code != respInvalidParameter {
		t.Fatalf("pop of queue 7 of 2: %v %+v", err, res)
	}
	stale := map[string]string{"consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": "1",
		"invisibleTime": "1000", "pollTime": "0", "bornTime": strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)}
	if resp, err := rawRequest(c.b.addr, codePopMessage, stale, nil, 5*time.Second); err != nil || resp.Code != respPollingTimeout {
		t.Fatalf("pop born a minute ago: %v %+v", err, resp)
	}

	// The un-acked ones, except m1 (its invisible time was extended), come back after 2 s.
	back := popUntil(t, c.b.addr, group, topic, 4, []string{"m4", "m5", "m7", "m8"}, invisible, 10*time.Second)
	if d := time.Since(popped); d < invisible {
		t.Fatalf("redelivered after %v, before the invisible time", d)
	}
	for _, r := range back {
		mustAck(t, c.b.addr, group, r)
	}
	// A stale checkpoint (from before the revival) is refused.
	if resp, err := popAckRaw(c.b.addr, group, byBody["m4"]); err != nil || resp.Code != respSuccess {
		t.Fatalf("ack of an already acked message through its old checkpoint: %v %+v", err, resp)
	}
	m1 := popUntil(t, c.b.addr, group, topic, 1, []string{"m1"}, invisible, 10*time.Second)
	if d := time.Since(popped); d < 6*time.Second {
		t.Fatalf("m1 came back after %v, before its changed invisible time", d)
	}
	if resp, err := popAckRaw(c.b.addr, group, byBody["m1"]); err != nil || resp.Code != respNoMessage {
		t.Fatalf("ack through m1's expired checkpoint: %v %+v", err, resp)
	}
	mustAck(t, c.b.addr, group, m1[0])
	for q := range 2 {
		if off, found, err := consumerOffset(c.b.addr, group, topic, q); err != nil || !found || off != 5 {
			t.Errorf("consumer offset of queue %d after acking all: %d %v %v", q, off, found, err)
		}
	}

	// Tag filter: a second group reading TagB only.
	tagGroup := uniq("CG_POP_TAG")
	tres, err := popRaw(c.b.addr, tagGroup, topic, -1, 32, invisible, 0, "TagB")
	if err != nil || tres.code != respSuccess {
		t.Fatalf("tag pop: %v %+v", err, tres)
	}
	if got := popBodies(tres.records); !slices.Equal(got, []string{"m1", "m3", "m5", "m7", "m9"}) {
		t.Fatalf("TagB pop got %v", got)
	}

	// Long polling: a POP waiting on an empty queue is answered when a message arrives.
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = sendRaw(c.b.addr, topic, 1, []byte("late"), "")
	}()
	start := time.Now()
	lres, err := popRaw(c.b.addr, group, topic, 1, 32, invisible, 5*time.Second, "*")
	if err != nil || lres.code != respSuccess || len(lres.records) != 1 || string(lres.records[0].Body) != "late" {
		t.Fatalf("long-polling pop: %v %+v", err, lres)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("long-polling pop answered after %v", d)
	}
	start = time.Now()
	if lres, err := popRaw(c.b.addr, uniq("CG_EMPTY"), topic, 0, 1, invisible, 600*time.Millisecond, "NoSuchTag"); err != nil || lres.code != respPullNotFound {
		t.Fatalf("long-polling pop with nothing to get: %v %+v", err, lres)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("long-polling pop with nothing gave up after %v", d)
	}
}

// TestPopRaftLeaderKill: a 3-node group; POP through a follower (forwarded to the leader), ack
// some, kill -9 the leader: on the new leader the acked messages never come back and the
// un-acked ones do, once their invisible time is over.
func TestPopRaftLeaderKill(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic, group := uniq("PopRaft"), uniq("CG_POPRAFT")
	createTopic(t, g.asCluster(leader), topic, 1)
	var all []string
	for i := range 6 {
		all = append(all, sendRawOK(t, leader.addr, topic, fmt.Sprintf("r%d", i)).body)
	}
	follower := g.followers(leader)[0]
	const invisible = 4 * time.Second
	popped := time.Now() // before the request: see TestPopClassic
	res, err := popRaw(follower.addr, group, topic, -1, 32, invisible, 0, "*")
	if err != nil || res.code != respSuccess {
		t.Fatalf("pop through a follower: %v %+v", err, res)
	}
	if got := popBodies(res.records); !slices.Equal(got, all) {
		t.Fatalf("pop got %v, want %v", got, all)
	}
	for _, r := range res.records[:3] {
		addr := leader.addr
		if r.QueueOffset == 0 {
			addr = follower.addr // forwarded ack
		}
		mustAck(t, addr, group, r)
	}
	unacked := popBodies(res.records[3:])
	leader.kill()
	next := g.waitMaster(t, 15*time.Second, leader)
	back := popUntil(t, next.addr, group, topic, 3, unacked, invisible, 25*time.Second)
	if d := time.Since(popped); d < invisible {
		t.Fatalf("redelivered after %v, before the invisible time", d)
	}
	for _, r := range back {
		mustAck(t, next.addr, group, r)
	}
	if res, err := popRaw(next.addr, group, topic, -1, 32, invisible, 0, "*"); err != nil || res.code != respPullNotFound {
		t.Fatalf("pop after acking everything: %v %+v", err, res)
	}
}
