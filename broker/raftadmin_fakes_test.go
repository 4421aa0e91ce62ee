package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"rocketraft/config"
	"rocketraft/protocol"
	"rocketraft/remoting"
	"rocketraft/storage"
)

// fakeAdminPlace is a raftAdminPlace without a store: rp nil is a classic broker.
type fakeAdminPlace struct{ rp *raftPlace }

func (p fakeAdminPlace) raft() (*raftPlace, error) {
	if p.rp == nil {
		return nil, errNotRaft
	}
	return p.rp, nil
}
func (fakeAdminPlace) acquire() (*storage.Store, func(), error) {
	return nil, nil, errors.New("no store in this test")
}
func (fakeAdminPlace) brokerID() int64  { return 2 }
func (fakeAdminPlace) roleName() string { return config.RoleSlave }

// fakeInvoker answers each address from answers (a missing address fails like a dead peer) and
// records the requests and the connections closed.
type fakeInvoker struct {
	mu      sync.Mutex
	answers map[string]func(req *remoting.Command) (*remoting.Command, error)
	calls   []string
	closed  []string
}

func (f *fakeInvoker) Invoke(_ context.Context, addr string, req *remoting.Command) (*remoting.Command, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s:%d", addr, req.Code))
	if a := f.answers[addr]; a != nil {
		return a(req)
	}
	return nil, fmt.Errorf("dial %s: connection refused", addr)
}

func (f *fakeInvoker) CloseAddr(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = append(f.closed, addr)
}

// jsonAnswer answers SUCCESS with v as the body.
func jsonAnswer(t *testing.T, v any) func(*remoting.Command) (*remoting.Command, error) {
	t.Helper()
	body, err := protocol.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return func(req *remoting.Command) (*remoting.Command, error) {
		resp := req.NewResponse(remoting.Success, "")
		resp.Body = body
		return resp, nil
	}
}

// codeAnswer answers code with remark.
func codeAnswer(code int32, remark string) func(*remoting.Command) (*remoting.Command, error) {
	return func(req *remoting.Command) (*remoting.Command, error) { return req.NewResponse(code, remark), nil }
}

// testRaftAdmin is a raftAdmin for broker "rb" at 127.0.0.1:10911 with a fake place (rp nil:
// classic), fake clients, and a logger writing into the returned buffer.
func testRaftAdmin(rp *raftPlace) (*raftAdmin, *fakeInvoker, *fakeInvoker, *bytes.Buffer) {
	cfg := config.NewBroker()
	cfg.BrokerName = "rb"
	var out bytes.Buffer
	ns, peers := &fakeInvoker{}, &fakeInvoker{}
	ra := &raftAdmin{
		place: fakeAdminPlace{rp: rp}, cfg: cfg,
		logger: hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Debug}),
		addr:   func() string { return "127.0.0.1:10911" },
		ns:     ns, peers: peers,
		forward:    func(*remoting.Conn, *remoting.Command) *remoting.Command { return nil },
		leaderAddr: func(context.Context) string { return "" },
		unregister: func() {},
		wg:         &sync.WaitGroup{}, stop: make(chan struct{}),
	}
	return ra, ns, peers, &out
}
