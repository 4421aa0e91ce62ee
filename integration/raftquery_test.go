package integration

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

const codeSearchOffsetByTimestamp = 29

// searchOffset sends SEARCH_OFFSET_BY_TIMESTAMP to addr.
func searchOffset(addr, topic string, q int, ts int64) (int64, error) {
	resp, err := rawRequest(addr, codeSearchOffsetByTimestamp, map[string]string{
		"topic": topic, "queueId": strconv.Itoa(q), "timestamp": strconv.FormatInt(ts, 10),
	}, nil, 5*time.Second)
	if err != nil {
		return 0, err
	}
	if resp.Code != respSuccess {
		return 0, fmt.Errorf("code %d %q", resp.Code, resp.Remark)
	}
	return strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
}

// TestRaftQueriesOnEveryNode: in a three-node group the leader and both followers answer
// QUERY_MESSAGE by key and by unique key, VIEW_MESSAGE_BY_ID and SEARCH_OFFSET_BY_TIMESTAMP from
// their own replica (the index and consume queues are built by every node's state machine, and
// commitlog offsets are the same on every node), and mqadmin's queryMsgByKey,
// queryMsgByUniqueKey, queryMsgById and queryMsgByOffset find the message through the name
// server. After the leader that stored it is killed, queryMsgById still finds it by asking the
// surviving members, which hold the same record.
func TestRaftQueriesOnEveryNode(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3)
	leader := g.waitMaster(t, 20*time.Second, nil)
	topic := uniq("RaftQuery")
	resp, err := rawRequest(leader.addr, metaCodeUpdateAndCreateTopic, map[string]string{
		"topic": topic, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSuccess {
		t.Fatalf("UPDATE_AND_CREATE_TOPIC: %v %+v", err, resp)
	}
	c := g.asCluster(leader)
	waitTopicRoute(t, c, topic)
	p := newProducer(t, c)
	sendSync(t, p, topic, "early", 5, func(i int, m *primitive.Message) { m.WithKeys([]string{fmt.Sprintf("early-%d", i)}) })
	time.Sleep(50 * time.Millisecond) // store times strictly after the early messages
	split := time.Now().UnixMilli()
	time.Sleep(50 * time.Millisecond)
	target := sendSync(t, p, topic, "target", 1, func(_ int, m *primitive.Message) {
		m.WithKeys([]string{"order-4711", "customer-42"})
	})[0]
	id, err := primitive.UnmarshalMsgID([]byte(target.offsetMsgID))
	if err != nil {
		t.Fatalf("offset msgId %q: %v", target.offsetMsgID, err)
	}

	for _, b := range g.nodes {
		for _, q := range []struct {
			key  string
			uniq bool
		}{{"order-4711", false}, {"customer-42", false}, {target.msgID, true}} {
			var found *record
			eventually(t, 15*time.Second, fmt.Sprintf("QUERY_MESSAGE %q on %s", q.key, b.proc.name), func() error {
				recs, code, err := queryMessage(b.addr, topic, q.key, q.uniq)
				if err != nil {
					return err
				}
				if code != respSuccess {
					return fmt.Errorf("code %d", code)
				}
				for _, r := range recs {
					if bytes.Equal(r.Body, []byte(target.body)) {
						found = r
						return nil
					}
				}
				return fmt.Errorf("%d records, none is %q", len(recs), target.body)
			})
			checkTarget(t, "query "+q.key+" on "+b.proc.name, found, target, topic, id.Offset)
		}
		resp, err := rawRequest(b.addr, codeViewMessageByID, map[string]string{"offset": strconv.FormatInt(id.Offset, 10)}, nil, 5*time.Second)
		if err != nil || resp.Code != respSuccess {
			t.Fatalf("VIEW_MESSAGE_BY_ID on %s: %v %+v", b.proc.name, err, resp)
		}
		recs, err := parseRecords(resp.Body)
		if err != nil || len(recs) != 1 {
			t.Fatalf("VIEW_MESSAGE_BY_ID body on %s: %d records, %v", b.proc.name, len(recs), err)
		}
		checkTarget(t, "view on "+b.proc.name, recs[0], target, topic, id.Offset)
		if off, err := searchOffset(b.addr, topic, 0, split); err != nil || off != 5 {
			t.Errorf("SEARCH_OFFSET_BY_TIMESTAMP between the batches on %s: %d, %v; want 5", b.proc.name, off, err)
		}
	}

	all := &cluster{ns: ns}
	if out := runAdmin(t, all, "queryMsgByKey", "-t", topic, "-k", "customer-42"); !strings.Contains(out, target.offsetMsgID) {
		t.Errorf("queryMsgByKey:\n%s", out)
	}
	if out := runAdmin(t, all, "queryMsgByUniqueKey", "-t", topic, "-i", target.msgID); !strings.Contains(out, target.body) || !strings.Contains(out, target.msgID) {
		t.Errorf("queryMsgByUniqueKey:\n%s", out)
	}
	if out := runAdmin(t, all, "queryMsgById", "-i", target.offsetMsgID); !strings.Contains(out, target.body) {
		t.Errorf("queryMsgById:\n%s", out)
	}
	if out := runAdmin(t, all, "queryMsgByOffset", "-t", topic, "-b", g.name, "-i", "0", "--offset", "5"); !strings.Contains(out, target.body) {
		t.Errorf("queryMsgByOffset:\n%s", out)
	}

	leader.kill()
	g.waitMaster(t, 15*time.Second, leader)
	if out := runAdmin(t, all, "queryMsgById", "-i", target.offsetMsgID); !strings.Contains(out, target.body) {
		t.Errorf("queryMsgById after the storing leader was killed:\n%s", out)
	}
	if out := runAdmin(t, all, "queryMsgByUniqueKey", "-t", topic, "-i", target.msgID); !strings.Contains(out, target.body) {
		t.Errorf("queryMsgByUniqueKey after the leader kill:\n%s", out)
	}
}
