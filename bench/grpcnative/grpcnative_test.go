package grpcnative

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/timestamppb"

	"rocketraft/bench"
	"rocketraft/proxy/rmqpb"
)

// fakeProxy is a MessagingService that records what a producer sends; every refuseEvery-th
// SendMessage (if > 0) is answered with a refusal status.
type fakeProxy struct {
	rmqpb.UnimplementedMessagingServiceServer
	refuseEvery int

	mu       sync.Mutex
	settings map[string]*rmqpb.Settings // by x-mq-client-id
	ids      map[string]bool
	sends    int
	badSend  string // the first malformed send, if any
}

func clientIDOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-mq-client-id"); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (f *fakeProxy) Telemetry(stream rmqpb.MessagingService_TelemetryServer) error {
	for {
		cmd, err := stream.Recv()
		if err != nil {
			return nil
		}
		f.mu.Lock()
		if _, dup := f.settings[clientIDOf(stream.Context())]; dup {
			f.badSend = "settings sent twice by " + clientIDOf(stream.Context())
		}
		f.settings[clientIDOf(stream.Context())] = cmd.GetSettings()
		f.mu.Unlock()
		if err := stream.Send(&rmqpb.TelemetryCommand{Status: &rmqpb.Status{Code: rmqpb.Code_OK},
			Command: &rmqpb.TelemetryCommand_Settings{Settings: cmd.GetSettings()}}); err != nil {
			return nil
		}
	}
}

func (f *fakeProxy) SendMessage(ctx context.Context, req *rmqpb.SendMessageRequest) (*rmqpb.SendMessageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sends++
	id := clientIDOf(ctx)
	msgs := req.GetMessages()
	switch {
	case f.settings[id] == nil:
		f.badSend = "send before settings from " + id
	case len(msgs) != 1:
		f.badSend = "not one message per call"
	case msgs[0].GetTopic().GetName() != "T" || len(msgs[0].GetBody()) != 100:
		f.badSend = "wrong topic or body size"
	case len(msgs[0].GetSystemProperties().GetMessageId()) != 32 || f.ids[msgs[0].GetSystemProperties().GetMessageId()]:
		f.badSend = "missing or repeated message id " + msgs[0].GetSystemProperties().GetMessageId()
	}
	f.ids[msgs[0].GetSystemProperties().GetMessageId()] = true
	if f.refuseEvery > 0 && f.sends%f.refuseEvery == 0 {
		return &rmqpb.SendMessageResponse{Status: &rmqpb.Status{Code: rmqpb.Code_TOO_MANY_REQUESTS, Message: "busy"}}, nil
	}
	return &rmqpb.SendMessageResponse{Status: &rmqpb.Status{Code: rmqpb.Code_OK},
		Entries: []*rmqpb.SendResultEntry{{Status: &rmqpb.Status{Code: rmqpb.Code_OK}, MessageId: msgs[0].GetSystemProperties().GetMessageId()}}}, nil
}

func startFake(t *testing.T, f *fakeProxy) string {
	t.Helper()
	f.settings, f.ids = map[string]*rmqpb.Settings{}, map[string]bool{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	rmqpb.RegisterMessagingServiceServer(s, f)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

func produceConfig(endpoint string, conns int, messages int64) bench.ProduceConfig {
	return bench.ProduceConfig{
		Common: bench.Common{Topic: "T", Duration: 20 * time.Second, Interval: time.Second, Quiet: true,
			MaxPrintedErrors: 0, Client: bench.ClientGRPC, Endpoint: endpoint, Connections: conns},
		Mode: bench.ModeSync, Size: 100, Concurrency: 16, Batch: 1, Messages: messages, SendTimeout: 3 * time.Second,
	}
}

// TestProduce: each connection announces a producer of the topic once, then every message is
// one SendMessage with its own message id and the configured body, spread over the
// connections, and the summary counts them all.
func TestProduce(t *testing.T) {
	f := &fakeProxy{}
	addr := startFake(t, f)
	sum, err := Produce(context.Background(), produceConfig(addr, 3, 300), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.badSend != "" {
		t.Fatal(f.badSend)
	}
	if sum.TotalMsgs != 300 || sum.TotalErrors != 0 || f.sends != 300 || len(f.ids) != 300 {
		t.Fatalf("summary %d msgs %d errors, proxy saw %d sends with %d ids; want 300, 0, 300, 300",
			sum.TotalMsgs, sum.TotalErrors, f.sends, len(f.ids))
	}
	if len(f.settings) != 3 {
		t.Fatalf("settings from %d client ids, want 3 (one per connection)", len(f.settings))
	}
	for id, s := range f.settings {
		pub := s.GetPublishing()
		if s.GetClientType() != rmqpb.ClientType_PRODUCER || len(pub.GetTopics()) != 1 || pub.GetTopics()[0].GetName() != "T" {
			t.Fatalf("settings of %s: %v, want a producer publishing T", id, s)
		}
	}
}

// TestProduceCountsRefusals: an answer other than OK is a failed send, counted and logged with
// its code, and the run goes on.
func TestProduceCountsRefusals(t *testing.T) {
	f := &fakeProxy{refuseEvery: 4}
	addr := startFake(t, f)
	var errs strings.Builder
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return errs.Write(p) })
	cfg := produceConfig(addr, 1, 200)
	cfg.MaxPrintedErrors = 1
	sum, err := Produce(context.Background(), cfg, io.Discard, w)
	if err != nil {
		t.Fatal(err)
	}
	if sum.TotalMsgs != 150 || sum.TotalErrors != 50 {
		t.Fatalf("%d msgs, %d errors; want 150 and 50", sum.TotalMsgs, sum.TotalErrors)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(errs.String(), "TOO_MANY_REQUESTS busy") {
		t.Fatalf("stderr does not name the refusal:\n%s", errs.String())
	}
}

// TestProduceNoProxy: an endpoint where nothing listens is an error before the run, within
// the dial's bound.
func TestProduceNoProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t0 := time.Now()
	_, err = Produce(context.Background(), produceConfig(addr, 1, 10), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "telemetry") {
		t.Fatalf("err = %v, want a telemetry failure", err)
	}
	if time.Since(t0) > 15*time.Second {
		t.Fatalf("took %s", time.Since(t0))
	}
}

type writerFunc func(p []byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }

// fakeConsumerProxy serves ReceiveMessage from a fixed supply of messages, batch by batch
// (then MESSAGE_NOT_FOUND), and records the acks.
type fakeConsumerProxy struct {
	fakeProxy
	supply int

	acked     map[string]bool
	ackCalls  int
	badRecv   string
	receiveNr int
}

func (f *fakeConsumerProxy) ReceiveMessage(req *rmqpb.ReceiveMessageRequest, stream rmqpb.MessagingService_ReceiveMessageServer) error {
	f.mu.Lock()
	id := clientIDOf(stream.Context())
	if s := f.settings[id]; s.GetSubscription().GetGroup().GetName() != "G" || req.GetGroup().GetName() != "G" ||
		req.GetMessageQueue().GetTopic().GetName() != "T" || req.GetInvisibleDuration().AsDuration() < 10*time.Second {
		f.badRecv = "receive without the subscription's settings, or a bad request"
	}
	n := min(int(req.GetBatchSize()), f.supply)
	f.supply -= n
	first := f.receiveNr
	f.receiveNr += n
	f.mu.Unlock()
	if n == 0 {
		return stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{
			Status: &rmqpb.Status{Code: rmqpb.Code_MESSAGE_NOT_FOUND}}})
	}
	if err := stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Status{Status: &rmqpb.Status{Code: rmqpb.Code_OK}}}); err != nil {
		return err
	}
	for i := range n {
		mid := fmt.Sprintf("m%d", first+i)
		handle := "h-" + mid
		m := &rmqpb.Message{Topic: &rmqpb.Resource{Name: "T"}, Body: make([]byte, 10),
			SystemProperties: &rmqpb.SystemProperties{MessageId: mid, ReceiptHandle: &handle, BornTimestamp: timestamppb.Now()}}
		if err := stream.Send(&rmqpb.ReceiveMessageResponse{Content: &rmqpb.ReceiveMessageResponse_Message{Message: m}}); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeConsumerProxy) AckMessage(_ context.Context, req *rmqpb.AckMessageRequest) (*rmqpb.AckMessageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ackCalls++
	for _, e := range req.GetEntries() {
		if e.GetReceiptHandle() != "h-"+e.GetMessageId() || f.acked[e.GetMessageId()] {
			f.badRecv = "bad or repeated ack of " + e.GetMessageId()
		}
		f.acked[e.GetMessageId()] = true
	}
	return &rmqpb.AckMessageResponse{Status: &rmqpb.Status{Code: rmqpb.Code_OK}}, nil
}

// TestConsume: the consumer announces its subscription, receives batches and acks each batch
// with one call, and the run ends when the expected number of messages arrived.
func TestConsume(t *testing.T) {
	f := &fakeConsumerProxy{supply: 100, acked: map[string]bool{}}
	f.settings, f.ids = map[string]*rmqpb.Settings{}, map[string]bool{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	rmqpb.RegisterMessagingServiceServer(s, f)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	cfg := bench.ConsumeConfig{Common: bench.Common{Topic: "T", Duration: 20 * time.Second, Interval: time.Second, Quiet: true,
		Client: bench.ClientGRPC, Endpoint: ln.Addr().String(), Connections: 2},
		Group: "G", Tag: "*", PullBatch: 10, Pollers: 3, Expect: 100, From: "last"}
	t0 := time.Now()
	sum, err := Consume(context.Background(), cfg, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(t0) > 10*time.Second {
		t.Fatalf("took %s: the run did not end at --expect", time.Since(t0))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.badRecv != "" {
		t.Fatal(f.badRecv)
	}
	if sum.TotalMsgs != 100 || len(f.acked) != 100 || f.ackCalls != 10 || len(f.settings) != 2 {
		t.Fatalf("%d msgs, %d acked in %d calls, %d clients; want 100, 100, 10, 2", sum.TotalMsgs, len(f.acked), f.ackCalls, len(f.settings))
	}
}
