package proxy

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"rocketraft/proxy/rmqpb"
)

// BenchmarkUnaryInterceptor: what the interceptor adds to one SendMessage (ACL off): the metrics
// of the call and of its message.
func BenchmarkUnaryInterceptor(b *testing.B) {
	s := &Server{metrics: newProxyMetrics("c", "n")}
	req := &rmqpb.SendMessageRequest{Messages: []*rmqpb.Message{{Topic: &rmqpb.Resource{Name: "T"}, Body: make([]byte, 1024)}}}
	resp := &rmqpb.SendMessageResponse{Status: ok(), Entries: []*rmqpb.SendResultEntry{{Status: ok()}}}
	info := &grpc.UnaryServerInfo{FullMethod: "/apache.rocketmq.v2.MessagingService/SendMessage"}
	h := func(context.Context, any) (any, error) { return resp, nil }
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.unary(ctx, req, info, h); err != nil {
				b.Fatal(err)
			}
		}
	})
}
