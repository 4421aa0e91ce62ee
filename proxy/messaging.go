package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"

	"rocketraft/message"
	"rocketraft/protocol"
	"rocketraft/proxy/rmqpb"
	"rocketraft/remoting"
)

// maxBodySize is what the proxy tells producers (Telemetry settings): a client adopts it as is,
// and 0 would refuse every body. The brokers' default maxMessageSize.
const maxBodySize = 4 << 20

// messaging serves rmqpb.MessagingService.
type messaging struct {
	rmqpb.UnimplementedMessagingServiceServer
	cfg     *Config
	routes  *routeCache
	leaders *leaderBook
	cl      *remoting.Client
	log     hclog.Logger
	next    atomic.Uint64 // round robin over write queues
}

func ok() *rmqpb.Status { return &rmqpb.Status{Code: rmqpb.Code_OK, Message: "OK"} }

func fail(code rmqpb.Code, format string, args ...any) *rmqpb.Status {
	return &rmqpb.Status{Code: code, Message: fmt.Sprintf(format, args...)}
}

// QueryRoute lists every queue of the topic's groups; each group is reached at the endpoints the
// client used (this proxy), as Apache's proxy does in cluster mode.
func (m *messaging) QueryRoute(ctx context.Context, req *rmqpb.QueryRouteRequest) (*rmqpb.QueryRouteResponse, error) {
	topic := req.GetTopic().GetName()
	if topic == "" {
		return &rmqpb.QueryRouteResponse{Status: fail(rmqpb.Code_ILLEGAL_TOPIC, "topic is empty")}, nil
	}
	r, err := m.routes.get(ctx, topic)
	if errors.Is(err, errNoRoute) {
		return &rmqpb.QueryRouteResponse{Status: fail(rmqpb.Code_TOPIC_NOT_FOUND, "topic %s not found", topic)}, nil
	}
	if err != nil {
		return &rmqpb.QueryRouteResponse{Status: fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err)}, nil
	}
	resp := &rmqpb.QueryRouteResponse{Status: ok()}
	for _, qd := range r.QueueDatas {
		n := max(qd.ReadQueueNums, qd.WriteQueueNums)
		for id := int32(0); id < n; id++ {
			resp.MessageQueues = append(resp.MessageQueues, &rmqpb.MessageQueue{
				Topic:      &rmqpb.Resource{Name: topic, ResourceNamespace: req.GetTopic().GetResourceNamespace()},
				Id:         id,
				Permission: queuePermission(qd, id),
				Broker:     &rmqpb.Broker{Name: qd.BrokerName, Id: 0, Endpoints: req.GetEndpoints()},
				// Topic message types are not kept by the brokers yet: every queue takes what the
				// proxy can send.
				AcceptMessageTypes: []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_DELAY},
			})
		}
	}
	if len(resp.MessageQueues) == 0 {
		resp.Status = fail(rmqpb.Code_TOPIC_NOT_FOUND, "topic %s has no queues", topic)
	}
	return resp, nil
}

// queuePermission is queue id's permission from its group's read and write queue counts and perm.
func queuePermission(qd *protocol.QueueData, id int32) rmqpb.Permission {
	r := id < qd.ReadQueueNums && qd.Perm&4 != 0
	w := id < qd.WriteQueueNums && qd.Perm&2 != 0
	switch {
	case r && w:
		return rmqpb.Permission_READ_WRITE
	case r:
		return rmqpb.Permission_READ
	case w:
		return rmqpb.Permission_WRITE
	}
	return rmqpb.Permission_NONE
}

// Heartbeat keeps nothing: the proxy is stateless.
func (m *messaging) Heartbeat(context.Context, *rmqpb.HeartbeatRequest) (*rmqpb.HeartbeatResponse, error) {
	return &rmqpb.HeartbeatResponse{Status: ok()}, nil
}

// Telemetry answers every Settings the client sends with the settings it should use, and keeps
// the stream open until the client ends it (a client that loses it only reopens it minutes
// later).
func (m *messaging) Telemetry(stream rmqpb.MessagingService_TelemetryServer) error {
	for {
		cmd, err := stream.Recv()
		if err == io.EOF || stream.Context().Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		s := cmd.GetSettings()
		if s == nil {
			continue // results of commands the proxy never sends
		}
		out := proto.Clone(s).(*rmqpb.Settings)
		if p := out.GetPublishing(); p != nil {
			p.MaxBodySize = maxBodySize
			p.ValidateMessageType = true
		}
		out.Metric = &rmqpb.Metric{On: false}
		if err := stream.Send(&rmqpb.TelemetryCommand{Status: ok(), Command: &rmqpb.TelemetryCommand_Settings{Settings: out}}); err != nil {
			return nil
		}
	}
}

// SendMessage stores each message through the owning group's master.
func (m *messaging) SendMessage(ctx context.Context, req *rmqpb.SendMessageRequest) (*rmqpb.SendMessageResponse, error) {
	resp := &rmqpb.SendMessageResponse{Status: ok()}
	for _, msg := range req.GetMessages() {
		e := m.send(ctx, msg)
		resp.Entries = append(resp.Entries, e)
		if e.Status.Code != rmqpb.Code_OK {
			resp.Status = e.Status
		}
	}
	if len(req.GetMessages()) == 0 {
		resp.Status = fail(rmqpb.Code_BAD_REQUEST, "no message")
	}
	return resp, nil
}

// send stores one message through its group's master, retrying once at a new master a first
// attempt that certainly stored nothing; an outcome the proxy cannot know is a failure the
// client retries, never a success (failover.go).
func (m *messaging) send(ctx context.Context, msg *rmqpb.Message) *rmqpb.SendResultEntry {
	sp := msg.GetSystemProperties()
	entry := &rmqpb.SendResultEntry{MessageId: sp.GetMessageId()}
	switch t := sp.GetMessageType(); t {
	case rmqpb.MessageType_NORMAL, rmqpb.MessageType_MESSAGE_TYPE_UNSPECIFIED:
	case rmqpb.MessageType_DELAY:
		if sp.GetDeliveryTimestamp() == nil {
			entry.Status = fail(rmqpb.Code_BAD_REQUEST, "a DELAY message needs a delivery timestamp")
			return entry
		}
	default:
		entry.Status = fail(rmqpb.Code_NOT_IMPLEMENTED, "message type %s is not served by this proxy yet (NORMAL and DELAY only)", t)
		return entry
	}
	topic := msg.GetTopic().GetName()
	brokerName, qid, err := m.pickQueue(ctx, topic)
	if errors.Is(err, errNoRoute) {
		entry.Status = fail(rmqpb.Code_TOPIC_NOT_FOUND, "%v", err)
		return entry
	}
	if err != nil {
		entry.Status = fail(rmqpb.Code_HA_NOT_AVAILABLE, "%v", err)
		return entry
	}
	bctx, cancel := m.budget(ctx)
	defer cancel()
	res := m.callMaster(bctx, topic, brokerName, m.cfg.SendTimeout, func() *remoting.Command { return m.request(msg, brokerName, qid) })
	return m.sendResult(entry, topic, brokerName, res)
}

// sendCode maps a broker's refusal to the client's code.
func sendCode(code int32) rmqpb.Code {
	switch code {
	case remoting.MessageIllegal:
		return rmqpb.Code_BAD_REQUEST
	case remoting.NoPermission:
		return rmqpb.Code_FORBIDDEN
	case remoting.TopicNotExist:
		return rmqpb.Code_TOPIC_NOT_FOUND
	case remoting.SystemBusy:
		return rmqpb.Code_TOO_MANY_REQUESTS // the clients back off before trying again
	case remoting.ServiceNotAvailable:
		return rmqpb.Code_HA_NOT_AVAILABLE
	}
	return rmqpb.Code_INTERNAL_SERVER_ERROR
}

// pickQueue chooses the next writable queue of topic, round robin over the queues of its groups
// that have a master in the route (the leader book says which node that is when sending).
func (m *messaging) pickQueue(ctx context.Context, topic string) (brokerName string, qid int32, err error) {
	r, err := m.routes.get(ctx, topic)
	if err != nil {
		return "", 0, err
	}
	n := 0
	for _, qd := range r.QueueDatas {
		if qd.Perm&2 != 0 && routeMaster(r, qd.BrokerName) != "" {
			n += int(qd.WriteQueueNums)
		}
	}
	if n == 0 {
		return "", 0, fmt.Errorf("topic %s: no writable queue with a master", topic)
	}
	i := int(m.next.Add(1) % uint64(n))
	for _, qd := range r.QueueDatas {
		if qd.Perm&2 == 0 || routeMaster(r, qd.BrokerName) == "" {
			continue
		}
		if i < int(qd.WriteQueueNums) {
			return qd.BrokerName, int32(i), nil
		}
		i -= int(qd.WriteQueueNums)
	}
	return "", 0, fmt.Errorf("topic %s: route changed while choosing a queue", topic)
}

// request is the SEND_MESSAGE_V2 of one gRPC message: the client's message id becomes UNIQ_KEY,
// tag and keys their properties; the producer group is the topic (as Apache's proxy does).
func (m *messaging) request(msg *rmqpb.Message, brokerName string, qid int32) *remoting.Command {
	sp := msg.GetSystemProperties()
	props := make(map[string]string, len(msg.GetUserProperties())+4)
	for k, v := range msg.GetUserProperties() {
		props[k] = v
	}
	if sp.GetMessageId() != "" {
		props[message.PropertyUniqClientMessageID] = sp.GetMessageId()
	}
	if sp.Tag != nil {
		props[message.PropertyTags] = sp.GetTag()
	}
	if len(sp.GetKeys()) > 0 {
		props[message.PropertyKeys] = strings.Join(sp.GetKeys(), " ")
	}
	if ts := sp.GetDeliveryTimestamp(); ts != nil {
		// The brokers' timer: delivered at that time (not before, at most a second late).
		props[message.PropertyTimerDeliverMS] = strconv.FormatInt(ts.AsTime().UnixMilli(), 10)
	}
	props[message.PropertyWaitStoreMsgOK] = "true"
	born := time.Now().UnixMilli()
	if t := sp.GetBornTimestamp(); t != nil {
		born = t.AsTime().UnixMilli()
	}
	h := protocol.SendMessageRequestHeader{
		ProducerGroup:         msg.GetTopic().GetName(),
		Topic:                 msg.GetTopic().GetName(),
		DefaultTopic:          "TBW102",
		DefaultTopicQueueNums: 4,
		QueueID:               qid,
		BornTimestamp:         born,
		Properties:            message.FormatProperties(props),
		BrokerName:            brokerName,
	}
	return remoting.NewRequest(remoting.SendMessageV2, h.ToExtV2(), msg.GetBody())
}
