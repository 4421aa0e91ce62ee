package proxy

// What every call goes through before and after its RPC (messaging.go, consume.go, ...), so the
// RPCs themselves know nothing of it: the ACL check (auth.go), the metrics (metrics.go), and the
// shutdown of streams. A stream's context is cancelled when the proxy starts shutting down, and
// a bidirectional stream's Recv (Telemetry) then returns io.EOF at once, so the handlers end
// with OK and GracefulStop does not wait on a client that keeps its stream open for its life.

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"rocketraft/proxy/rmqpb"
)

// rpcName is the method part of /apache.rocketmq.v2.MessagingService/SendMessage.
func rpcName(fullMethod string) string { return fullMethod[strings.LastIndexByte(fullMethod, '/')+1:] }

func remoteOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// messageOf makes an empty request (input) or response of a MessagingService method.
func messageOf(fullMethod string, input bool) (proto.Message, bool) {
	m := rmqpb.File_apache_rocketmq_v2_service_proto.Services().ByName("MessagingService").Methods().ByName(protoreflect.Name(rpcName(fullMethod)))
	if m == nil {
		return nil, false
	}
	d := m.Output()
	if input {
		d = m.Input()
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		return nil, false
	}
	return mt.New().Interface(), true
}

// withStatus is an empty response of the method carrying st (every response of the service has
// a status field; a streamed one has it in its content).
func withStatus(fullMethod string, st *rmqpb.Status) (proto.Message, bool) {
	msg, ok := messageOf(fullMethod, false)
	if !ok {
		return nil, false
	}
	f := msg.ProtoReflect().Descriptor().Fields().ByName("status")
	if f == nil {
		return nil, false
	}
	msg.ProtoReflect().Set(f, protoreflect.ValueOfMessage(st.ProtoReflect()))
	return msg, true
}

// statusHolder is every response with a status.
type statusHolder interface{ GetStatus() *rmqpb.Status }

// resultOf is the result label of a call: its in-band code, or the gRPC code of a transport
// error.
func resultOf(resp any, err error) string {
	if err != nil {
		return "GRPC_" + strings.ToUpper(status.Code(err).String())
	}
	if h, ok := resp.(statusHolder); ok && h.GetStatus() != nil {
		return h.GetStatus().GetCode().String()
	}
	return rmqpb.Code_OK.String()
}

// callMetadata is the call's metadata when ACL needs it (reading it copies it: not on every call
// of a proxy without ACL).
func (s *Server) callMetadata(ctx context.Context) metadata.MD {
	if s.acl == nil {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	return md
}

// unary checks the ACL and the names the call carries, runs the RPC and records it.
func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	rpc := rpcName(info.FullMethod)
	md := s.callMetadata(ctx)
	var resp any
	var err error
	remote := ""
	if s.acl != nil {
		remote = remoteOf(ctx) // formatting the address is measurable on every call; only ACL reads it
	}
	st := s.authorize(md, remote, rpc, req)
	if st == nil {
		st = checkNames(req) // names.go
	}
	if st != nil {
		if r, ok := withStatus(info.FullMethod, st); ok {
			resp = r
		} else {
			err = status.Error(codes.PermissionDenied, st.GetMessage()) // a method outside the service
		}
	} else {
		resp, err = handler(ctx, req)
		if r, ok := resp.(*rmqpb.SendMessageResponse); ok && err == nil {
			s.metrics.sent(req.(*rmqpb.SendMessageRequest), r)
		}
	}
	s.metrics.observe(rpc, resultOf(resp, err), time.Since(start))
	return resp, err
}

// stream checks the ACL (a server-streaming call's request is read here and handed to the RPC),
// gives the RPC a stream whose context ends at shutdown, and records the call.
func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	rpc := rpcName(info.FullMethod)
	md := s.callMetadata(ss.Context())
	remote := remoteOf(ss.Context())
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	w := &guardedStream{ServerStream: ss, ctx: ctx, s: s, fullMethod: info.FullMethod, md: md, remote: remote, bidi: info.IsClientStream}
	refuse := func(st *rmqpb.Status) error {
		if r, ok := withStatus(info.FullMethod, st); ok {
			_ = ss.SendMsg(r)
			s.metrics.observe(rpc, st.GetCode().String(), time.Since(start))
			return nil
		}
		return status.Error(codes.PermissionDenied, st.GetMessage())
	}
	if !info.IsClientStream {
		req, ok := messageOf(info.FullMethod, true)
		if ok {
			if err := ss.RecvMsg(req); err != nil {
				return err
			}
			if st := s.authorize(md, remote, rpc, req); st != nil {
				return refuse(st)
			}
			if st := checkNames(req); st != nil {
				return refuse(st)
			}
			w.pending = req
			if r, ok := req.(*rmqpb.ReceiveMessageRequest); ok {
				w.group = r.GetGroup().GetName()
			}
		}
	} else if st := s.authorize(md, remote, rpc, nil); st != nil {
		return refuse(st)
	}
	err := handler(srv, w)
	result := w.firstResult()
	if result == "" || err != nil {
		result = resultOf(nil, err)
	}
	s.metrics.observe(rpc, result, time.Since(start))
	return err
}

// guardedStream is the stream an RPC sees (stream above).
type guardedStream struct {
	grpc.ServerStream
	ctx        context.Context
	s          *Server
	fullMethod string
	md         metadata.MD
	remote     string
	bidi       bool
	pending    proto.Message // the request already read
	group      string        // ReceiveMessage's consumer group
	mu         sync.Mutex    // guards result: a handler may send from another goroutine
	result     string        // the first in-band status sent
}

// noteResult keeps the first in-band status code the call answered.
func (w *guardedStream) noteResult(st *rmqpb.Status) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.result == "" {
		w.result = st.GetCode().String()
	}
}

func (w *guardedStream) firstResult() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.result
}

func (w *guardedStream) Context() context.Context { return w.ctx }

func (w *guardedStream) RecvMsg(m any) error {
	if w.pending != nil {
		proto.Merge(m.(proto.Message), w.pending)
		w.pending = nil
		return nil
	}
	if !w.bidi {
		return w.ServerStream.RecvMsg(m)
	}
	// A client stream: ends with io.EOF as soon as the proxy shuts down.
	fresh := m.(proto.Message).ProtoReflect().New().Interface()
	got := make(chan error, 1)
	go func() { got <- w.ServerStream.RecvMsg(fresh) }()
	select {
	case err := <-got:
		if err != nil {
			return err
		}
	case <-w.ctx.Done():
		return io.EOF
	}
	st := w.s.authorize(w.md, w.remote, rpcName(w.fullMethod), fresh)
	if st == nil {
		st = checkNames(fresh)
	}
	if st != nil {
		if r, ok := withStatus(w.fullMethod, st); ok {
			_ = w.ServerStream.SendMsg(r)
		}
		w.noteResult(st)
		return io.EOF
	}
	proto.Merge(m.(proto.Message), fresh)
	return nil
}

func (w *guardedStream) SendMsg(m any) error {
	switch r := m.(type) {
	case *rmqpb.ReceiveMessageResponse:
		if msg := r.GetMessage(); msg != nil {
			w.s.metrics.delivered(w.group, msg)
		} else if st := r.GetStatus(); st != nil {
			w.noteResult(st)
		}
	case statusHolder:
		if st := r.GetStatus(); st != nil {
			w.noteResult(st)
		}
	}
	return w.ServerStream.SendMsg(m)
}
