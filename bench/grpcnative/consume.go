package grpcnative

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	"rocketraft/bench"
	"rocketraft/proxy/rmqpb"
)

// Receive parameters of the consumer: how long a received message stays invisible to others
// (the proxy accepts 10 s .. 12 h), and how long one ReceiveMessage waits for messages.
const (
	invisibleDuration = 20 * time.Second
	longPolling       = 5 * time.Second
)

// consumerSettings announces a simple consumer of group subscribed to topic with expression.
func consumerSettings(group, topic, expression string, timeout time.Duration) *rmqpb.Settings {
	simple := rmqpb.ClientType_SIMPLE_CONSUMER
	return &rmqpb.Settings{
		ClientType:     &simple,
		RequestTimeout: durationpb.New(timeout),
		PubSub: &rmqpb.Settings_Subscription{Subscription: &rmqpb.Subscription{
			Group: &rmqpb.Resource{Name: group},
			Subscriptions: []*rmqpb.SubscriptionEntry{{Topic: &rmqpb.Resource{Name: topic},
				Expression: &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: expression}}},
			LongPollingTimeout: durationpb.New(longPolling),
		}},
		UserAgent: userAgent(),
	}
}

// Consume is bench.RunConsume through a proxy with this package's simple consumer: Connections
// HTTP/2 connections (each its own client id and Telemetry stream with the subscription), and
// Pollers goroutines, each poll on the next connection, calling ReceiveMessage (up to PullBatch messages,
// at most 32, 20 s invisible, 5 s long polling) and acknowledging what it got with one
// AckMessage of all of them. Latency is end to end (receive time minus the born timestamp). A
// new group starts at the queues' end (the proxy's POP), so --from first is not available.
func Consume(ctx context.Context, cfg bench.ConsumeConfig, stdout, stderr io.Writer) (*bench.Summary, error) {
	if cfg.From == "first" {
		return nil, fmt.Errorf("--client grpc: a new group starts where the queues end (POP); --from first is not available")
	}
	endpoints := strings.Split(cfg.Endpoint, ";")
	var conns []*conn
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i := range cfg.Connections {
		id := "mqbench-native-consumer@" + strconv.Itoa(os.Getpid()) + "@" + strconv.Itoa(i)
		c, err := dial(dctx, strings.TrimSpace(endpoints[i%len(endpoints)]), id,
			consumerSettings(cfg.Group, cfg.Topic, cfg.Tag, 3*time.Second), cfg.GRPCTLS)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	group, topic := &rmqpb.Resource{Name: cfg.Group}, &rmqpb.Resource{Name: cfg.Topic}
	req := &rmqpb.ReceiveMessageRequest{
		Group:              group,
		MessageQueue:       &rmqpb.MessageQueue{Topic: topic},
		FilterExpression:   &rmqpb.FilterExpression{Type: rmqpb.FilterType_TAG, Expression: cfg.Tag},
		BatchSize:          int32(min(cfg.PullBatch, 32)),
		InvisibleDuration:  durationpb.New(invisibleDuration),
		LongPollingTimeout: durationpb.New(longPolling),
	}
	var next atomic.Uint64 // polls go round robin over the connections
	banner := fmt.Sprintf("mqbench consume: client=%s endpoint=%s topic=%s group=%s batch=%d pollers=%d connections=%d",
		Name, cfg.Endpoint, cfg.Topic, cfg.Group, req.BatchSize, cfg.Pollers, len(conns))
	poll := func(sink *bench.PollSink, stopped func() bool) {
		c := conns[next.Add(1)%uint64(len(conns))]
		msgs, err := receive(c, req)
		if err != nil && len(msgs) == 0 {
			if !stopped() {
				sink.Fail(err)
				sink.Backoff()
			}
			return
		}
		nowUs := time.Now().UnixMicro()
		sink.Record(func(st *bench.Stats) {
			for _, m := range msgs {
				st.Msgs++
				st.Bytes += uint64(len(m.GetBody()))
				if bt := m.GetSystemProperties().GetBornTimestamp(); bt != nil {
					st.Latency.Record(nowUs - bt.AsTime().UnixMicro())
				}
			}
			st.Ops++
		})
		if err := ack(c, group, topic, msgs); err != nil {
			sink.Fail(err)
		}
		sink.Done(len(msgs))
	}
	return bench.RunPollers(ctx, cfg, bench.ClientGRPC, "simple", banner, poll, stdout, stderr)
}

// receive makes one ReceiveMessage call and returns the messages it streamed; a status other
// than OK (or MESSAGE_NOT_FOUND, which returns no messages and no error) is an error.
func receive(c *conn, req *rmqpb.ReceiveMessageRequest) ([]*rmqpb.Message, error) {
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), c.md), longPolling+5*time.Second)
	defer cancel()
	stream, err := c.svc.ReceiveMessage(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("ReceiveMessage: %w", err)
	}
	var msgs []*rmqpb.Message
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return msgs, nil
		}
		if err != nil {
			return msgs, fmt.Errorf("ReceiveMessage: %w", err)
		}
		if st := resp.GetStatus(); st != nil {
			switch st.GetCode() {
			case rmqpb.Code_OK:
			case rmqpb.Code_MESSAGE_NOT_FOUND:
				return msgs, nil
			default:
				return msgs, fmt.Errorf("ReceiveMessage: %s %s", st.GetCode(), st.GetMessage())
			}
		}
		if m := resp.GetMessage(); m != nil {
			msgs = append(msgs, m)
		}
	}
}

// ack acknowledges msgs with one AckMessage.
func ack(c *conn, group, topic *rmqpb.Resource, msgs []*rmqpb.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	req := &rmqpb.AckMessageRequest{Group: group, Topic: topic}
	for _, m := range msgs {
		req.Entries = append(req.Entries, &rmqpb.AckMessageEntry{MessageId: m.GetSystemProperties().GetMessageId(),
			ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()})
	}
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), c.md), 5*time.Second)
	defer cancel()
	resp, err := c.svc.AckMessage(ctx, req)
	if err != nil {
		return fmt.Errorf("AckMessage of %d: %w", len(msgs), err)
	}
	if st := resp.GetStatus(); st.GetCode() != rmqpb.Code_OK {
		return fmt.Errorf("AckMessage of %d: %s %s", len(msgs), st.GetCode(), st.GetMessage())
	}
	return nil
}
