package acl_test

import (
	"context"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"rocketraft/acl"
	"rocketraft/protocol"
	"rocketraft/remoting"
)

// TestOfficialGoClientSignatures takes its vectors from the official Go client's own signing
// code (its ACL interceptor lives in an internal package, so it is driven through a producer):
// an in-process server plays name server and broker, records every request the producer signs
// (route lookup, SEND_MESSAGE with the message body, and whatever else it sends), and each
// must verify with the secret and fail with another. A SecurityToken is configured, so the Go
// client's quirk of sending it without signing it is exercised too.
func TestOfficialGoClientSignatures(t *testing.T) {
	rlog.SetLogLevel("error")
	const ak, sk, token = "goClientAK", "goClientSecret", "session-token-1"
	var mu sync.Mutex
	var seen []*remoting.Command
	record := func(req *remoting.Command) {
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
	}
	srv := remoting.NewServer(remoting.ServerConfig{Addr: "127.0.0.1:0", Intercept: func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		record(req)
		return nil
	}})
	var addr string
	srv.Handle(remoting.GetRouteInfoByTopic, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		rd := protocol.TopicRouteData{
			QueueDatas:  []*protocol.QueueData{{BrokerName: "b", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}},
			BrokerDatas: []*protocol.BrokerData{{Cluster: "c", BrokerName: "b", BrokerAddrs: map[int64]string{0: addr}}},
		}
		resp := req.NewResponse(remoting.Success, "")
		resp.Body = protocol.MustEncode(rd)
		return resp
	})
	srv.Handle(remoting.HeartBeat, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		return req.NewResponse(remoting.Success, "")
	})
	send := func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		resp := req.NewResponse(remoting.Success, "")
		resp.ExtFields = map[string]string{"msgId": "0A0000010000000000000000", "queueId": "0", "queueOffset": "0"}
		return resp
	}
	srv.Handle(remoting.SendMessage, send)
	srv.Handle(remoting.SendMessageV2, send)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr = srv.Addr()

	p, err := rocketmq.NewProducer(
		producer.WithNameServer([]string{addr}),
		producer.WithGroupName("PG_ACL_VECTORS"),
		producer.WithCredentials(primitive.Credentials{AccessKey: ak, SecretKey: sk, SecurityToken: token}),
		producer.WithRetry(0),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Shutdown() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.SendSync(ctx, primitive.NewMessage("TopicVectors", []byte("body signed by the Go client \x00\xff"))); err != nil {
		t.Fatalf("send: %v", err)
	}
	_ = p.Shutdown() // its unregister/heartbeat requests are recorded too

	mu.Lock()
	defer mu.Unlock()
	codes := map[int32]bool{}
	for _, req := range seen {
		codes[req.Code] = true
		if req.Ext(acl.ExtAccessKey) != ak || req.Ext(acl.ExtSecurityToken) != token {
			t.Fatalf("code %d: AccessKey/SecurityToken not sent: %v", req.Code, req.ExtFields)
		}
		if !acl.VerifySignature(req.ExtFields, req.Body, sk) {
			t.Errorf("code %d (body %d bytes): the Go client's signature does not verify", req.Code, len(req.Body))
		}
		if acl.VerifySignature(req.ExtFields, req.Body, "anotherSecret") {
			t.Errorf("code %d: verifies with the wrong secret", req.Code)
		}
	}
	t.Logf("verified Go-client-signed request codes: %v", codes)
	for _, c := range []int32{remoting.GetRouteInfoByTopic, remoting.SendMessage} {
		if !codes[c] {
			t.Errorf("no request code %d recorded (got %v)", c, codes)
		}
	}
}
