package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// sqlSelector is the SQL92 subscription the tests use, and sqlSelected says which of the sent
// messages (by index) it selects: a in 1..2 and region 'eu', plus every message whose tag is
// TagZ (TAGS is a property too).
var sqlSelector = consumer.MessageSelector{Type: consumer.SQL92, Expression: "(a BETWEEN 1 AND 2 AND region = 'eu') OR TAGS = 'TagZ'"}

func sqlSelected(i int) bool { return (i%5 == 1 || i%5 == 2) && i%2 == 0 || i%7 == 0 }

// sendForSQL sends n messages with properties a = i%5, region = eu/us by parity, and tag TagZ
// on every seventh, and returns the bodies the SQL92 selector must deliver.
func sendForSQL(t *testing.T, c *cluster, topic string, n int) []string {
	t.Helper()
	p := newProducer(t, c)
	sent := sendSync(t, p, topic, "sql", n, func(i int, m *primitive.Message) {
		m.WithProperty("a", fmt.Sprint(i%5))
		region := "us"
		if i%2 == 0 {
			region = "eu"
		}
		m.WithProperty("region", region)
		if i%7 == 0 {
			m.WithTag("TagZ")
		} else {
			m.WithTag("TagY")
		}
	})
	var want []string
	for i, s := range sent {
		if sqlSelected(i) {
			want = append(want, s.body)
		}
	}
	return want
}

// checkSQLConsumer starts a push consumer with sqlSelector and checks it gets exactly want.
func checkSQLConsumer(t *testing.T, c *cluster, topic string, want []string) {
	t.Helper()
	pc := startPushConsumer(t, c, uniq("GSql"), topic, sqlSelector)
	eventually(t, 40*time.Second, "SQL92 consumer receives the selected messages", func() error {
		return countErr("SQL92 consumer", pc.got.count(), len(want))
	})
	time.Sleep(time.Second) // anything unselected that slipped through would arrive by now
	pc.shutdown()
	if d := diffBodies(want, pc.got.snapshot()); len(d.missing)+len(d.extra) > 0 {
		t.Fatalf("SQL92 consumer: %s", d)
	}
}

// TestSQL92FilterClassic: with enablePropertyFilter the official push consumer subscribed with a
// SQL92 expression receives exactly the messages whose properties match; a raw pull with a bad
// expression gets SUBSCRIPTION_PARSE_FAILED; without enablePropertyFilter SQL92 is refused.
func TestSQL92FilterClassic(t *testing.T) {
	t.Parallel()
	c := startCluster(t, withProp("enablePropertyFilter", "true"))
	topic := uniq("Sql92")
	want := sendForSQL(t, c, topic, 60)
	checkSQLConsumer(t, c, topic, want)

	resp, err := rawRequest(c.b.addr, codePullMessage, map[string]string{
		"consumerGroup": uniq("GSqlBad"), "topic": topic, "queueId": "0", "queueOffset": "0",
		"maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
		"subscription": "a >", "subVersion": "0", "expressionType": "SQL92",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != 23 { // SUBSCRIPTION_PARSE_FAILED
		t.Fatalf("pull with a bad SQL92 expression: %v %+v", err, resp)
	}

	off := startCluster(t)
	resp, err = rawRequest(off.b.addr, codePullMessage, map[string]string{
		"consumerGroup": uniq("GSqlOff"), "topic": "TBW102", "queueId": "0", "queueOffset": "0",
		"maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
		"subscription": "a > 1", "subVersion": "0", "expressionType": "SQL92",
	}, nil, 10*time.Second)
	if err != nil || resp.Code != respSystemError {
		t.Fatalf("SQL92 pull without enablePropertyFilter: %v %+v", err, resp)
	}
}

// TestSQL92FilterRaftGroup: the same subscription against a three-node group, reading from the
// leader and, through raw pulls, from a follower's replica.
func TestSQL92FilterRaftGroup(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, withProp("enablePropertyFilter", "true"))
	leader := g.waitMaster(t, 20*time.Second, nil)
	c := g.asCluster(leader)
	topic := uniq("Sql92Raft")
	want := sendForSQL(t, c, topic, 40)
	checkSQLConsumer(t, c, topic, want)

	f := g.followers(leader)[0]
	n := routedQueues(t, ns.addr, topic)
	var got []string
	eventually(t, 20*time.Second, "a follower serves the SQL92-selected messages", func() error {
		got = got[:0]
		for q := range n {
			for off := int64(0); ; {
				recs, next, err := rawPullExpr(f.addr, uniq("GSqlF"), topic, q, off, sqlSelector.Expression, "SQL92")
				if err != nil {
					return err
				}
				for _, r := range recs {
					got = append(got, string(r.Body))
				}
				if next <= off {
					break
				}
				off = next
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("%d of %d selected messages from the follower", len(got), len(want))
		}
		return nil
	})
	slices.Sort(got)
	w := slices.Clone(want)
	slices.Sort(w)
	if !slices.Equal(got, w) {
		t.Fatalf("follower's SQL92 pulls: got %v, want %v", got, w)
	}
}
