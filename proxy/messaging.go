package proxy

import (
	"context"
	"errors"
	"fmt"
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
	leaders *leaderBook // each group's master (leaders.go)
	cl      *remoting.Client
	log     hclog.Logger
	next    atomic.Uint64 // round robin over write queues
	confs   configCache   // topic and group configs (configs.go)
	// clients holds the clients' Telemetry streams and settings (clients.go).
	clients *clientRegistry
	// registrar registers the proxy as a producer at the brokers (txnregister.go).
	registrar *producerRegistrar
	// stopping closes when the proxy starts shutting down (Server.Close): a long poll waiting
	// on a broker then ends at once (the stream's context is cancelled too, interceptors.go).
	stopping <-chan struct{}
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
	accept := m.topicAcceptTypes(ctx, topic) // fifo.go
	for _, qd := range r.QueueDatas {
		n := max(qd.ReadQueueNums, qd.WriteQueueNums)
		for id := int32(0); id < n; id++ {
			resp.MessageQueues = append(resp.MessageQueues, &rmqpb.MessageQueue{
				Topic:      &rmqpb.Resource{Name: topic, ResourceNamespace: req.GetTopic().GetResourceNamespace()},
				Id:         id,
				Permission: queuePermission(qd, id),
				Broker:     &rmqpb.Broker{Name: qd.BrokerName, Id: 0, Endpoints: req.GetEndpoints()},
				// From the topic's message.type attribute (fifo.go).
				AcceptMessageTypes: accept,
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

// Heartbeat keeps nothing, but asks a client whose settings this proxy does not hold (it
// restarted, or the client's Telemetry stream went to another proxy) for them, as Apache's proxy
// does: UNRECOGNIZED_CLIENT_TYPE makes the clients send their settings again on a new stream,
// which check-backs need (clients.go).
func (m *messaging) Heartbeat(ctx context.Context, _ *rmqpb.HeartbeatRequest) (*rmqpb.HeartbeatResponse, error) {
	if m.clients != nil && !m.clients.known(clientID(ctx)) {
		return &rmqpb.HeartbeatResponse{Status: fail(rmqpb.Code_UNRECOGNIZED_CLIENT_TYPE, "no settings of client %q on this proxy; send them on a Telemetry stream", clientID(ctx))}, nil
	}
	return &rmqpb.HeartbeatResponse{Status: ok()}, nil
}

// Telemetry answers every Settings the client sends with the settings it should use, and keeps
// the stream open until the client ends it (a client that loses it only reopens it minutes
// later).
func (m *messaging) Telemetry(stream rmqpb.MessagingService_TelemetryServer) error {
	c := m.clients.open(stream)
	defer m.clients.close(c)
	for {
		cmd, err := stream.Recv()
		if err != nil {
			// The client ended it (io.EOF), or the connection is gone: either way nothing is
			// left to answer, and an error status would only make the client drop it.
			return nil
		}
		s := cmd.GetSettings()
		if s == nil {
			continue // results of commands the proxy sent (none needs an answer)
		}
		m.clients.update(c, s)
		out := proto.Clone(s).(*rmqpb.Settings)
		if p := out.GetPublishing(); p != nil {
			p.MaxBodySize = maxBodySize
			p.ValidateMessageType = true
		}
		out.Metric = &rmqpb.Metric{On: false}
		m.serverSettings(stream.Context(), out) // settings.go: retry policies, batch size, fifo
		if err := c.send(&rmqpb.TelemetryCommand{Status: ok(), Command: &rmqpb.TelemetryCommand_Settings{Settings: out}}); err != nil {
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
	case rmqpb.MessageType_NORMAL, rmqpb.MessageType_MESSAGE_TYPE_UNSPECIFIED, rmqpb.MessageType_TRANSACTION:
	case rmqpb.MessageType_DELAY:
		if sp.GetDeliveryTimestamp() == nil {
			entry.Status = fail(rmqpb.Code_BAD_REQUEST, "a DELAY message needs a delivery timestamp")
			return entry
		}
	case rmqpb.MessageType_FIFO:
	default:
		entry.Status = fail(rmqpb.Code_NOT_IMPLEMENTED, "unknown message type %s", t)
		return entry
	}
	topic := msg.GetTopic().GetName()
	if st := m.checkMessageType(ctx, topic, sp); st != nil { // fifo.go
		entry.Status = st
		return entry
	}
	brokerName, qid, err := m.pickQueueFor(ctx, topic, sp.GetMessageGroup())
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
	entry = m.sendResult(entry, topic, brokerName, res)
	if entry.Status.Code == rmqpb.Code_OK && sp.GetMessageType() == rmqpb.MessageType_TRANSACTION {
		entry.TransactionId, entry.Status = m.halfSent(ctx, brokerName, res.resp) // transaction.go
	}
	return entry
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
	if g := sp.GetMessageGroup(); g != "" {
		props[propertyShardingKey] = g // fifo.go
	}
	if ts := sp.GetDeliveryTimestamp(); ts != nil {
		// The brokers' timer: delivered at that time (not before, at most a second late).
		props[message.PropertyTimerDeliverMS] = strconv.FormatInt(ts.AsTime().UnixMilli(), 10)
	}
	props[message.PropertyWaitStoreMsgOK] = "true"
	halfProperties(msg, props)
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
		SysFlag:               halfSysFlag(msg),
	}
	return remoting.NewRequest(remoting.SendMessageV2, h.ToExtV2(), msg.GetBody())
}
