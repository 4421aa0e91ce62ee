package rmqpb_test

import (
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"rocketraft/proxy/rmqpb"
)

// roundTrip marshals in, unmarshals the bytes into out and requires the two to be equal.
func roundTrip(t *testing.T, in, out proto.Message) {
	t.Helper()
	b, err := proto.Marshal(in)
	if err != nil {
		t.Fatalf("marshal %T: %v", in, err)
	}
	if len(b) == 0 {
		t.Fatalf("marshal %T: no bytes", in)
	}
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatalf("unmarshal %T: %v", out, err)
	}
	if !proto.Equal(in, out) {
		t.Fatalf("round trip of %T changed it:\n in: %v\nout: %v", in, in, out)
	}
}

func TestSendMessageRequestRoundTrip(t *testing.T) {
	born := time.Date(2026, 1, 2, 3, 4, 5, 6000000, time.UTC)
	deliver := born.Add(90 * time.Second)
	in := &rmqpb.SendMessageRequest{
		Messages: []*rmqpb.Message{{
			Topic:          &rmqpb.Resource{ResourceNamespace: "ns", Name: "TopicFIFO"},
			UserProperties: map[string]string{"k1": "v1", "k2": ""},
			SystemProperties: &rmqpb.SystemProperties{
				Tag:               proto.String("TagA"),
				Keys:              []string{"key-1", "key-2"},
				MessageId:         "01AABBCCDDEEFF00112233445566",
				BodyEncoding:      rmqpb.Encoding_IDENTITY,
				MessageType:       rmqpb.MessageType_FIFO,
				BornTimestamp:     timestamppb.New(born),
				BornHost:          "client-host",
				MessageGroup:      proto.String("group-7"),
				DeliveryTimestamp: timestamppb.New(deliver),
				InvisibleDuration: durationpb.New(30 * time.Second),
			},
			Body: []byte("hello\x00world"),
		}},
	}
	out := &rmqpb.SendMessageRequest{}
	roundTrip(t, in, out)

	sp := out.GetMessages()[0].GetSystemProperties()
	if sp.MessageGroup == nil || sp.GetMessageGroup() != "group-7" {
		t.Errorf("message_group = %v, want group-7", sp.MessageGroup)
	}
	if got := sp.GetDeliveryTimestamp().AsTime(); !got.Equal(deliver) {
		t.Errorf("delivery_timestamp = %v, want %v", got, deliver)
	}
	if sp.GetMessageType() != rmqpb.MessageType_FIFO {
		t.Errorf("message_type = %v, want FIFO", sp.GetMessageType())
	}
	// Unset optional (proto3 "optional") fields stay absent, not zero: the proxy must tell
	// "no message group" from an empty one.
	if sp.TraceContext != nil || sp.ReceiptHandle != nil || sp.QueueOffset != nil {
		t.Errorf("unset optional fields came back set: %v", sp)
	}
}

func TestQueryRouteResponseRoundTrip(t *testing.T) {
	topic := &rmqpb.Resource{Name: "TopicTest"}
	broker := &rmqpb.Broker{
		Name: "broker-a",
		Id:   0,
		Endpoints: &rmqpb.Endpoints{
			Scheme:    rmqpb.AddressScheme_IPv4,
			Addresses: []*rmqpb.Address{{Host: "127.0.0.1", Port: 8081}},
		},
	}
	in := &rmqpb.QueryRouteResponse{
		Status: &rmqpb.Status{Code: rmqpb.Code_OK, Message: "OK"},
	}
	for i := int32(0); i < 4; i++ {
		in.MessageQueues = append(in.MessageQueues, &rmqpb.MessageQueue{
			Topic:              topic,
			Id:                 i,
			Permission:         rmqpb.Permission_READ_WRITE,
			Broker:             broker,
			AcceptMessageTypes: []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_FIFO, rmqpb.MessageType_DELAY},
		})
	}
	out := &rmqpb.QueryRouteResponse{}
	roundTrip(t, in, out)
	if n := len(out.GetMessageQueues()); n != 4 {
		t.Fatalf("%d message queues, want 4", n)
	}
	if a := out.GetMessageQueues()[3].GetBroker().GetEndpoints().GetAddresses()[0]; a.GetHost() != "127.0.0.1" || a.GetPort() != 8081 {
		t.Errorf("broker address = %v", a)
	}
}

// proxyRPCs are the MessagingService methods the proxy must serve, with whether the client and
// the server stream.
var proxyRPCs = []struct {
	name                    string
	clientStream, srvStream bool
}{
	{"QueryRoute", false, false},
	{"Heartbeat", false, false},
	{"SendMessage", false, false},
	{"QueryAssignment", false, false},
	{"ReceiveMessage", false, true},
	{"AckMessage", false, false},
	{"ForwardMessageToDeadLetterQueue", false, false},
	{"PullMessage", false, true},
	{"UpdateOffset", false, false},
	{"GetOffset", false, false},
	{"QueryOffset", false, false},
	{"EndTransaction", false, false},
	{"Telemetry", true, true},
	{"NotifyClientTermination", false, false},
	{"ChangeInvisibleDuration", false, false},
	{"RecallMessage", false, false},
}

func TestMessagingServiceDescriptor(t *testing.T) {
	fd := rmqpb.File_apache_rocketmq_v2_service_proto
	if got := fd.Path(); got != "apache/rocketmq/v2/service.proto" {
		t.Errorf("file registered as %q", got)
	}
	if got := fd.Package(); got != "apache.rocketmq.v2" {
		t.Errorf("package %q", got)
	}
	// The file is in the global registry under its upstream path, which is what gRPC server
	// reflection and the official clients' descriptors agree on.
	if reg, err := protoregistry.GlobalFiles.FindFileByPath("apache/rocketmq/v2/service.proto"); err != nil || reg != fd {
		t.Errorf("global registry: %v, %v", reg, err)
	}

	sd := fd.Services().ByName("MessagingService")
	if sd == nil {
		t.Fatal("service MessagingService not found")
	}
	if got := sd.FullName(); got != "apache.rocketmq.v2.MessagingService" {
		t.Errorf("service full name %q", got)
	}
	grpcMethods := map[string]bool{}
	for _, m := range rmqpb.MessagingService_ServiceDesc.Methods {
		grpcMethods[m.MethodName] = true
	}
	grpcStreams := map[string]grpc.StreamDesc{}
	for _, s := range rmqpb.MessagingService_ServiceDesc.Streams {
		grpcStreams[s.StreamName] = s
	}
	if rmqpb.MessagingService_ServiceDesc.ServiceName != string(sd.FullName()) {
		t.Errorf("grpc ServiceDesc name %q", rmqpb.MessagingService_ServiceDesc.ServiceName)
	}
	for _, want := range proxyRPCs {
		md := sd.Methods().ByName(protoreflect.Name(want.name))
		if md == nil {
			t.Errorf("rpc %s missing from MessagingService", want.name)
			continue
		}
		if md.IsStreamingClient() != want.clientStream || md.IsStreamingServer() != want.srvStream {
			t.Errorf("rpc %s: client/server streaming = %v/%v, want %v/%v", want.name,
				md.IsStreamingClient(), md.IsStreamingServer(), want.clientStream, want.srvStream)
		}
		if want.clientStream || want.srvStream {
			s, ok := grpcStreams[want.name]
			if !ok || s.ClientStreams != want.clientStream || s.ServerStreams != want.srvStream {
				t.Errorf("rpc %s: grpc stream desc %+v (present %v)", want.name, s, ok)
			}
		} else if !grpcMethods[want.name] {
			t.Errorf("rpc %s: no unary grpc method desc", want.name)
		}
	}
	// Methods beyond the list are fine (e.g. SyncLiteSubscription); log them so a protocol
	// update that adds one is visible.
	known := map[string]bool{}
	for _, r := range proxyRPCs {
		known[r.name] = true
	}
	for i := 0; i < sd.Methods().Len(); i++ {
		if n := string(sd.Methods().Get(i).Name()); !known[n] {
			t.Logf("MessagingService also has rpc %s", n)
		}
	}
}
