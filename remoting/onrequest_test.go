package remoting

import (
	"context"
	"sync"
	"testing"
	"time"
)

// OnRequest sees every answered request with its response code and the handler's time, and
// nothing for a request the handler answers later (nil response, as long polling does).
func TestServerOnRequest(t *testing.T) {
	type seen struct {
		code, resp int32
		elapsed    time.Duration
	}
	var mu sync.Mutex
	var got []seen
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", OnRequest: func(code, resp int32, d time.Duration) {
		mu.Lock()
		got = append(got, seen{code, resp, d})
		mu.Unlock()
	}})
	s.Handle(HeartBeat, func(_ *Conn, req *Command) *Command {
		time.Sleep(20 * time.Millisecond)
		return req.NewResponse(Success, "")
	})
	s.Handle(PullMessage, func(conn *Conn, req *Command) *Command {
		go func() {
			resp := req.NewResponse(Success, "")
			resp.Opaque, resp.Flag = req.Opaque, FlagResponse
			_ = conn.Reply(resp)
		}()
		return nil
	})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cl := NewClient(ClientConfig{})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, code := range []int32{HeartBeat, 9999, PullMessage} {
		if _, err := cl.Invoke(ctx, s.Addr(), NewRequest(code, nil, nil)); err != nil {
			t.Fatalf("code %d: %v", code, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].code != HeartBeat || got[0].resp != Success || got[0].elapsed < 20*time.Millisecond ||
		got[1].code != 9999 || got[1].resp != RequestCodeNotSupported {
		t.Fatalf("observed %+v, want HEART_BEAT/SUCCESS >= 20ms then 9999/REQUEST_CODE_NOT_SUPPORTED", got)
	}
}
