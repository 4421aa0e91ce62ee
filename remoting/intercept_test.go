package remoting

import (
	"context"
	"testing"
	"time"
)

// The server's interceptor answers instead of the handler when it returns a response, and the
// client's BeforeRequest sees every request before it is encoded.
func TestInterceptAndBeforeRequest(t *testing.T) {
	s := NewServer(ServerConfig{Addr: "127.0.0.1:0", Intercept: func(_ *Conn, req *Command) *Command {
		if req.Ext("token") != "ok" {
			return req.NewResponse(NoPermission, "no token")
		}
		return nil
	}})
	s.Handle(HeartBeat, func(_ *Conn, req *Command) *Command { return req.NewResponse(Success, "") })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	plain := NewClient(ClientConfig{})
	defer plain.Close()
	resp, err := plain.Invoke(ctx, s.Addr(), NewRequest(HeartBeat, nil, nil))
	if err != nil || resp.Code != NoPermission || resp.Remark != "no token" {
		t.Fatalf("unsigned: %v %v", resp, err)
	}
	signing := NewClient(ClientConfig{BeforeRequest: func(c *Command) { c.SetExt("token", "ok") }})
	defer signing.Close()
	if resp, err = signing.Invoke(ctx, s.Addr(), NewRequest(HeartBeat, nil, nil)); err != nil || resp.Code != Success {
		t.Fatalf("signed: %v %v", resp, err)
	}
	// Unknown codes pass the interceptor first (RocketMQ checks every request).
	if resp, err = plain.Invoke(ctx, s.Addr(), NewRequest(9999, nil, nil)); err != nil || resp.Code != NoPermission {
		t.Fatalf("unknown code unsigned: %v %v", resp, err)
	}
}
