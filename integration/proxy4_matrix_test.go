package integration

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// The scenarios the broker passes with direct clients, run with the official Go 4.x client given
// only two proxies' remoting addresses (the helpers of the direct tests take the cluster, whose
// clientNameServers are then the proxies). Checks that read the broker itself (raw pulls of a
// DLQ, committed offsets) still go to the broker directly.

// proxy4MatrixProps are the broker properties the scenarios need together.
func proxy4MatrixProps() []brokerOpt {
	return append([]brokerOpt{withProp("messageDelayLevel", testDelayLevels), withProp("enablePropertyFilter", "true")}, txnProps...)
}

// runProxy4Matrix runs every scenario as a parallel subtest through the proxies of pc.
func runProxy4Matrix(t *testing.T, pc *cluster) {
	t.Run("sends-tags", func(t *testing.T) { t.Parallel(); proxy4Scenarios(t, pc) })
	t.Run("pull-consumer", func(t *testing.T) {
		t.Parallel()
		topic := uniq("P4Pull")
		want := bodies(sendSync(t, newProducer(t, pc), topic, "pull", 40, nil))
		if d := diffBodies(want, pollAll(t, pc, uniq("GP4Pull"), topic, len(want))); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
			t.Errorf("pull consumer through the proxies: %s", d)
		}
	})
	t.Run("broadcasting", func(t *testing.T) {
		t.Parallel()
		topic, group := uniq("P4Bcast"), uniq("GP4Bcast")
		want := bodies(sendSync(t, newProducer(t, pc), topic, "bcast", 30, nil))
		bc := consumer.WithConsumerModel(consumer.BroadCasting)
		cs := []*pushConsumer{startPushConsumer(t, pc, group, topic, all, bc), startPushConsumer(t, pc, group, topic, all, bc)}
		for i, c := range cs {
			eventually(t, 60*time.Second, fmt.Sprintf("broadcasting consumer %d receives all", i+1), func() error {
				return countErr(fmt.Sprintf("consumer %d", i+1), c.got.count(), len(want))
			})
		}
		for i, c := range cs {
			c.shutdown()
			if d := diffBodies(want, c.got.snapshot()); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
				t.Errorf("broadcasting consumer %d: %s", i+1, d)
			}
		}
	})
	t.Run("sql92", func(t *testing.T) {
		t.Parallel()
		topic := uniq("P4Sql")
		checkSQLConsumer(t, pc, topic, sendForSQL(t, pc, topic, 40))
	})
	t.Run("orderly", func(t *testing.T) { t.Parallel(); checkOrderlyVia(t, pc) })
	t.Run("delay", func(t *testing.T) { t.Parallel(); checkDelayLevel(t, pc) })
	t.Run("retry-dlq", func(t *testing.T) { t.Parallel(); checkRetryToDLQ(t, pc, nil) })
	t.Run("transactions", func(t *testing.T) {
		t.Parallel()
		topic := uniq("P4Txn")
		first := sendFirst(t, newProducer(t, pc), topic, "create-topic")
		cons := startPushConsumer(t, pc, uniq("GP4Txn"), topic, all)
		l := newTxnListener(false, true)
		p := startTxnProducer(t, joinAddrs(pc), uniq("PGP4Txn"), l)
		res := sendTxns(t, p, topic, "txp", 0, 8)
		var bs []string
		for i := range res {
			bs = append(bs, fmt.Sprintf("txp-%d", i))
		}
		expectTxnDelivery(t, cons, l, bs, []string{first.body})
		if l.totalChecks() == 0 {
			t.Errorf("no check-back reached the transaction producer through the proxies")
		}
		t.Logf("through the proxies: %d transactions, %d check-backs answered", len(bs), l.totalChecks())
	})
	t.Run("offsets-consumer-restart", func(t *testing.T) {
		t.Parallel()
		topic, group := uniq("P4Off"), uniq("GP4Off")
		p := newProducer(t, pc)
		setA := bodies(sendSync(t, p, topic, "A", 30, nil))
		c1 := startPushConsumer(t, pc, group, topic, all)
		eventually(t, 60*time.Second, "first consumer receives set A", func() error {
			return countErr("first consumer", c1.got.count(), len(setA))
		})
		// The client commits every 5 s and at shutdown.
		c1.shutdown()
		eventually(t, 20*time.Second, "the group's offsets committed at each queue's end", func() error {
			for q := range 4 {
				max, err := maxOffset(pc.b.addr, topic, q)
				if err != nil {
					return err
				}
				off, found, err := consumerOffset(pc.b.addr, group, topic, q)
				if err != nil {
					return err
				}
				if max > 0 && (!found || off != max) {
					return fmt.Errorf("queue %d: committed %d (found %v), max %d", q, off, found, max)
				}
			}
			return nil
		})
		setB := bodies(sendSync(t, p, topic, "B", 30, nil))
		c2 := startPushConsumer(t, pc, group, topic, all)
		eventually(t, 60*time.Second, "second consumer receives set B", func() error {
			return countErr("second consumer", c2.got.count(), len(setB))
		})
		time.Sleep(time.Second)
		c2.shutdown()
		if d := diffBodies(setB, c2.got.snapshot()); len(d.missing)+len(d.extra)+len(d.dups) > 0 {
			t.Errorf("second consumer of the group should get exactly set B: %s", d)
		}
	})
	t.Run("query-key-id", func(t *testing.T) {
		t.Parallel()
		topic := uniq("P4Query")
		p := newProducer(t, pc)
		sendSync(t, p, topic, "noise", 5, func(i int, m *primitive.Message) { m.WithKeys([]string{fmt.Sprintf("noise-%d", i)}) })
		target := sendSync(t, p, topic, "target", 1, func(_ int, m *primitive.Message) { m.WithKeys([]string{"order-4711"}) })[0]
		for _, px := range pc.via {
			for _, q := range []struct {
				key  string
				uniq bool
			}{{"order-4711", false}, {target.msgID, true}} {
				eventually(t, 15*time.Second, fmt.Sprintf("QUERY_MESSAGE %q through %s", q.key, px), func() error {
					recs, code, err := queryMessage(px, topic, q.key, q.uniq)
					if err != nil || code != respSuccess {
						return fmt.Errorf("code %d, %v", code, err)
					}
					for _, r := range recs {
						if !bytes.Equal(r.Body, []byte(target.body)) {
							return fmt.Errorf("found %q too", r.Body)
						}
					}
					return countErr("records", len(recs), 1)
				})
			}
			id, err := primitive.UnmarshalMsgID([]byte(target.offsetMsgID))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rawRequest(px, codeViewMessageByID, map[string]string{"offset": strconv.FormatInt(id.Offset, 10)}, nil, 5*time.Second)
			if err != nil || resp.Code != respSuccess {
				t.Fatalf("VIEW_MESSAGE_BY_ID through %s: %v %+v", px, err, resp)
			}
			recs, err := parseRecords(resp.Body)
			if err != nil || len(recs) != 1 || string(recs[0].Body) != target.body {
				t.Fatalf("VIEW_MESSAGE_BY_ID through %s: %d records %v", px, len(recs), err)
			}
		}
	})
}

// checkOrderlyVia: messages of ten keys sent with a hash queue selector are consumed by an
// orderly consumer (queue locks through the proxies) in per-key order.
func checkOrderlyVia(t *testing.T, pc *cluster) {
	topic := uniq("P4Orderly")
	p := newProducer(t, pc, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	const orders, steps = 10, 10
	for step := range steps {
		for o := range orders {
			m := primitive.NewMessage(topic, []byte(fmt.Sprintf("order-%d:%d", o, step)))
			m.WithShardingKey(fmt.Sprintf("order-%d", o))
			if r, err := p.SendSync(context.Background(), m); err != nil || r.Status != primitive.SendOK {
				t.Fatalf("send: %v %v", err, r)
			}
		}
	}
	consumeOrdersInOrder(t, pc, uniq("GP4Orderly"), topic, orders, steps)
}

// TestProxy4MatrixClassic: the scenarios on a classic broker behind two proxies.
func TestProxy4MatrixClassic(t *testing.T) {
	t.Parallel()
	c := startCluster(t, proxy4MatrixProps()...)
	pc, _ := viaProxies(t, c)
	runProxy4Matrix(t, pc)
}

// TestProxy4MatrixRaftGroup: the scenarios on a three-node group behind two proxies.
func TestProxy4MatrixRaftGroup(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, proxy4MatrixProps()...)
	leader := g.waitMaster(t, 20*time.Second, nil)
	pc, _ := viaProxies(t, g.asCluster(leader))
	runProxy4Matrix(t, pc)
}
