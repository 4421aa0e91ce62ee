package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"rocketraft/broker/meta"
	"rocketraft/fsm"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
	"rocketraft/storage/vfs"
)

// adminTables are the three metadata tables the handler types read, opened in a temporary
// directory.
type adminTables struct {
	topics  *meta.Topics
	groups  *meta.Groups
	offsets *meta.Offsets
}

func openAdminTables(t *testing.T) adminTables {
	t.Helper()
	b := metaBroker(t, t.TempDir()) // metachange_test.go: the tables in a temporary directory
	return adminTables{topics: b.topics, groups: b.groups, offsets: b.offsets}
}

// putTopic stores a read-write topic of queues queues.
func (tb adminTables) putTopic(t *testing.T, name string, queues int32) {
	t.Helper()
	tc := protocol.NewTopicConfig(name)
	tc.ReadQueueNums, tc.WriteQueueNums = queues, queues
	if err := tb.topics.Put(tc); err != nil {
		t.Fatal(err)
	}
}

// metaRecorder is a fake metadata change path: it records every op and applies topic and group
// puts to the tables (as the classic place would), or fails with err.
type metaRecorder struct {
	tb  adminTables
	ops []*fsm.MetaOp
	err error
}

func (m *metaRecorder) change(op *fsm.MetaOp) error {
	m.ops = append(m.ops, op)
	if m.err != nil {
		return m.err
	}
	switch op.Op {
	case fsm.OpPutTopic:
		return m.tb.topics.Put(op.Topic)
	case fsm.OpPutGroup:
		return m.tb.groups.Put(op.Group)
	}
	return nil
}

// answer is answerChange's fake: the change's outcome as SUCCESS or a metadata error.
func (m *metaRecorder) answer(req *remoting.Command, what, _, _ string, op *fsm.MetaOp) *remoting.Command {
	if err := m.change(op); err != nil {
		return metaErrorResponse(req, what, err)
	}
	return req.NewResponse(remoting.Success, "")
}

// serveHere is forwardOrRefuse on a node that serves writes itself.
func serveHere(*remoting.Conn, *remoting.Command) *remoting.Command { return nil }

// refuseAsFollower is forwardOrRefuse on a follower that could not reach its leader.
func refuseAsFollower(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	return req.NewResponse(remoting.ServiceNotAvailable, "not the leader")
}

// counter counts calls of a func() dependency (triggerRegister and the like).
type counter struct{ n int }

func (c *counter) inc() { c.n++ }

// memStore is a store on an in-memory file system, closed when the test ends.
func memStore(t *testing.T) *storage.Store {
	t.Helper()
	sc := storage.DefaultConfig("/data/store")
	sc.FS = vfs.NewMemFS()
	sc.MappedFileSizeCommitLog = 1 << 20
	sc.MappedFileSizeConsumeQueue = 1000 * storage.ConsumeQueueUnitSize
	st, err := storage.Open(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// storeAt stores one message per given store time in queue qid of topic.
func storeAt(t *testing.T, st *storage.Store, topic string, qid int32, times ...time.Time) {
	t.Helper()
	for _, at := range times {
		if _, err := st.Append(context.Background(), [][]byte{recordAt(t, topic, qid, at, "")}); err != nil {
			t.Fatal(err)
		}
	}
}

// acquireOf is acquireStore over st; errStoreGone is the acquire of a closing broker.
func acquireOf(st *storage.Store) func() (*storage.Store, func(), error) {
	return func() (*storage.Store, func(), error) { return st, noRelease, nil }
}

var errStoreGone = errors.New("store closed")

func acquireFails() (*storage.Store, func(), error) { return nil, nil, errStoreGone }

// decode parses a response body into v, failing the test on a non-SUCCESS answer.
func decode(t *testing.T, resp *remoting.Command, v any) {
	t.Helper()
	if resp.Code != remoting.Success {
		t.Fatalf("code %d %q, want SUCCESS", resp.Code, resp.Remark)
	}
	if err := protocol.Decode(resp.Body, v); err != nil {
		t.Fatalf("body %s: %v", resp.Body, err)
	}
}

// wantCode fails the test unless resp has code and a remark containing remark.
func wantCode(t *testing.T, what string, resp *remoting.Command, code int32, remark string) {
	t.Helper()
	if resp.Code != code || !strings.Contains(resp.Remark, remark) {
		t.Errorf("%s: %d %q, want %d with %q", what, resp.Code, resp.Remark, code, remark)
	}
}

// loopConn is a real connection to an in-process loopback server, for the clients manager to
// hold (it reads the remote address).
func loopConn(t *testing.T) *remoting.Conn {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0"})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c := remoting.NewClient(remoting.ClientConfig{})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := c.Conn(ctx, srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// consumerHeartbeat is a heartbeat of one clustering consumer of group subscribed to topics.
func consumerHeartbeat(clientID, group string, topics ...string) *protocol.HeartbeatData {
	cd := protocol.ConsumerData{GroupName: group, ConsumeType: "CONSUME_PASSIVELY", MessageModel: protocol.Clustering, ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET"}
	for _, tp := range topics {
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, protocol.SubscriptionData{Topic: tp, SubString: "*", ExpressionType: protocol.ExpressionTag})
	}
	return &protocol.HeartbeatData{ClientID: clientID, ConsumerDataSet: []protocol.ConsumerData{cd}}
}

// requestWith is a request of code whose header is base with ext applied over it: a value "-"
// removes the key (a missing field), any other value replaces or adds it.
func requestWith(code int32, base, ext map[string]string) *remoting.Command {
	h := make(map[string]string, len(base)+len(ext))
	for k, v := range base {
		h[k] = v
	}
	for k, v := range ext {
		if v == "-" {
			delete(h, k)
		} else {
			h[k] = v
		}
	}
	return remoting.NewRequest(code, h, nil)
}
