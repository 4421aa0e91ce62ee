// Package grpcnative is the benchmark's own lean RocketMQ 5 gRPC client, on this repository's
// stubs (proxy/rmqpb). Its producer sends its settings once on a Telemetry stream per
// connection, then one unary SendMessage per message with a message id, over a few plaintext
// HTTP/2 connections; its simple consumer (consume.go) receives and acks each batch with one
// call. It does what a proxy needs from a client and no more (no route queries, heartbeats, retries or
// metrics), so that a benchmark through a proxy measures the proxy rather than the official 5.x
// client, which costs more CPU per message than the proxy on a shared machine (docs/benchmarks.md, "The
// gRPC proxy against direct remoting"). It must never be linked with the official client
// (bench/grpc5): both register the same protobuf names.
package grpcnative

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"rocketraft/bench"
	"rocketraft/proxy/rmqpb"
)

// Name is this client's name in banners and summaries.
const Name = "grpc-native"

// Client is this package's runs, for bench.UseGRPC.
var Client = bench.GRPCClient{Name: Name, Produce: Produce, Consume: Consume}

// conn is one HTTP/2 connection to a proxy, with the identity its calls carry.
type conn struct {
	cc  *grpc.ClientConn
	svc rmqpb.MessagingServiceClient
	md  metadata.MD // x-mq-client-id and friends, the same on every call
	tel rmqpb.MessagingService_TelemetryClient
}

// producerSettings announces a producer of topic.
func producerSettings(topic string, timeout time.Duration) *rmqpb.Settings {
	producer := rmqpb.ClientType_PRODUCER
	return &rmqpb.Settings{
		ClientType:     &producer,
		RequestTimeout: durationpb.New(timeout),
		PubSub:         &rmqpb.Settings_Publishing{Publishing: &rmqpb.Publishing{Topics: []*rmqpb.Resource{{Name: topic}}}},
		UserAgent:      userAgent(),
	}
}

func userAgent() *rmqpb.UA {
	return &rmqpb.UA{Language: rmqpb.Language_GOLANG, Version: "rocketraft-bench", Platform: "linux", Hostname: hostname()}
}

// dial opens one connection to endpoint as client id and sends settings on its Telemetry
// stream, waiting for the proxy's answer.
func dial(ctx context.Context, endpoint, id string, settings *rmqpb.Settings, useTLS bool) (*conn, error) {
	creds := insecure.NewCredentials()
	if useTLS {
		creds = credentials.NewTLS(nil)
	}
	cc, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	c := &conn{cc: cc, svc: rmqpb.NewMessagingServiceClient(cc),
		md: metadata.Pairs("x-mq-client-id", id, "x-mq-language", "GOLANG", "x-mq-protocol", "v2", "x-mq-client-version", "rocketraft-bench")}
	// The stream lives as long as the connection (the proxy forgets a producer whose stream
	// ends), so its context is not ctx.
	tel, err := c.svc.Telemetry(metadata.NewOutgoingContext(context.Background(), c.md))
	if err != nil {
		cc.Close()
		return nil, fmt.Errorf("telemetry stream to %s: %w", endpoint, err)
	}
	c.tel = tel
	answered := make(chan error, 1)
	go func() {
		if err := tel.Send(&rmqpb.TelemetryCommand{Command: &rmqpb.TelemetryCommand_Settings{Settings: settings}}); err != nil {
			answered <- fmt.Errorf("send settings: %w", err)
			return
		}
		resp, err := tel.Recv()
		switch {
		case err != nil:
			answered <- fmt.Errorf("settings answer: %w", err)
		case resp.GetStatus() != nil && resp.GetStatus().GetCode() != rmqpb.Code_OK:
			answered <- fmt.Errorf("settings refused: %s %s", resp.GetStatus().GetCode(), resp.GetStatus().GetMessage())
		default:
			answered <- nil
		}
	}()
	select {
	case err = <-answered:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		c.close()
		return nil, fmt.Errorf("telemetry with %s: %w", endpoint, err)
	}
	// The proxy may push commands later (none a producer must answer for a benchmark): read
	// them so that the stream's flow control never stalls.
	go func() {
		for {
			if _, err := tel.Recv(); err != nil {
				return
			}
		}
	}()
	return c, nil
}

// close ends the Telemetry stream and the connection.
func (c *conn) close() {
	if c.tel != nil {
		_ = c.tel.CloseSend()
	}
	_ = c.cc.Close()
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return h
}

// ids hands out message ids: 32 hex digits, a random per-run prefix and a counter (the proxy
// stores the id as the message's UNIQ_KEY and answers with it).
type ids struct {
	prefix string
	n      atomic.Uint64
}

func newIDs() *ids {
	var r [8]byte
	_, _ = crand.Read(r[:])
	return &ids{prefix: hex.EncodeToString(r[:])}
}

func (u *ids) next() string {
	var b [32]byte
	copy(b[:], u.prefix)
	n := u.n.Add(1)
	const digits = "0123456789abcdef"
	for i := 31; i >= 16; i-- {
		b[i] = digits[n&0xF]
		n >>= 4
	}
	return string(b[:])
}

// Produce is bench.RunProduce through a proxy with this package's producer: Connections HTTP/2
// connections (each its own client id and Telemetry stream) to the ';'-separated endpoints in
// turn, and Concurrency SendMessage calls in flight (one goroutine each, sync or async alike),
// spread round robin over the connections. A send is one call without retries; its latency is
// the call's wall time, and an answer other than OK is a failed send.
func Produce(ctx context.Context, cfg bench.ProduceConfig, stdout, stderr io.Writer) (*bench.Summary, error) {
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
		id := "mqbench-native@" + strconv.Itoa(os.Getpid()) + "@" + strconv.Itoa(i)
		c, err := dial(dctx, strings.TrimSpace(endpoints[i%len(endpoints)]), id, producerSettings(cfg.Topic, cfg.SendTimeout), cfg.GRPCTLS)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	body := make([]byte, cfg.Size)
	_, _ = crand.Read(body)
	idGen := newIDs()
	topic := &rmqpb.Resource{Name: cfg.Topic}
	var tag *string
	if cfg.Tag != "" {
		tag = &cfg.Tag
	}
	born := hostname()
	var next atomic.Uint64
	send := func(ctx context.Context) error {
		c := conns[next.Add(1)%uint64(len(conns))]
		id := idGen.next()
		req := &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{
			Topic: topic,
			SystemProperties: &rmqpb.SystemProperties{
				MessageId:     id,
				Tag:           tag,
				BodyEncoding:  rmqpb.Encoding_IDENTITY,
				MessageType:   rmqpb.MessageType_NORMAL,
				BornTimestamp: timestamppb.Now(),
				BornHost:      born,
			},
			Body: body,
		}}}
		resp, err := c.svc.SendMessage(metadata.NewOutgoingContext(ctx, c.md), req)
		if err != nil {
			return fmt.Errorf("SendMessage %s: %w", id, err)
		}
		if st := resp.GetStatus(); st.GetCode() != rmqpb.Code_OK {
			return fmt.Errorf("SendMessage %s: %s %s", id, st.GetCode(), st.GetMessage())
		}
		return nil
	}
	banner := fmt.Sprintf("mqbench produce: client=%s endpoint=%s topic=%s mode=%s size=%d concurrency=%d connections=%d",
		Name, cfg.Endpoint, cfg.Topic, cfg.Mode, cfg.Size, cfg.Concurrency, len(conns))
	return bench.RunSends(ctx, cfg, bench.ClientGRPC, banner, bench.Sends{Sync: send}, stdout, stderr)
}
