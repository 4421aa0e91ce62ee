package proxy

import (
	"context"
	"errors"

	"rocketraft/proxy/rmqpb"
)

// QueryAssignment tells a push consumer which queues to receive from. Consumption is POP, so the
// brokers balance a group's consumers themselves: a concurrent group gets one assignment per
// broker group with a master, queue id -1 (ReceiveMessage pops all its readable queues); a FIFO
// group gets one assignment per readable queue, so that each queue's order is kept by receiving
// from it alone. Every assignment names this proxy as the endpoint, as QueryRoute does.
func (m *messaging) QueryAssignment(ctx context.Context, req *rmqpb.QueryAssignmentRequest) (*rmqpb.QueryAssignmentResponse, error) {
	topic, group := req.GetTopic().GetName(), req.GetGroup().GetName()
	if topic == "" {
		return &rmqpb.QueryAssignmentResponse{Status: fail(rmqpb.Code_ILLEGAL_TOPIC, "topic is empty")}, nil
	}
	if group == "" {
		return &rmqpb.QueryAssignmentResponse{Status: fail(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "group is empty")}, nil
	}
	r, err := m.routes.get(ctx, topic)
	if errors.Is(err, errNoRoute) {
		return &rmqpb.QueryAssignmentResponse{Status: fail(rmqpb.Code_TOPIC_NOT_FOUND, "topic %s not found", topic)}, nil
	}
	if err != nil {
		return &rmqpb.QueryAssignmentResponse{Status: fail(rmqpb.Code_INTERNAL_SERVER_ERROR, "%v", err)}, nil
	}
	fifo := m.orderly(ctx, group, topic)
	resp := &rmqpb.QueryAssignmentResponse{Status: ok()}
	for _, qd := range r.QueueDatas {
		if qd.Perm&4 == 0 || qd.ReadQueueNums <= 0 || routeMaster(r, qd.BrokerName) == "" {
			continue // not readable, or no master to pop from now
		}
		mq := func(id int32) *rmqpb.Assignment {
			return &rmqpb.Assignment{MessageQueue: &rmqpb.MessageQueue{
				Topic:              &rmqpb.Resource{Name: topic, ResourceNamespace: req.GetTopic().GetResourceNamespace()},
				Id:                 id,
				Permission:         rmqpb.Permission_READ,
				Broker:             &rmqpb.Broker{Name: qd.BrokerName, Id: 0, Endpoints: req.GetEndpoints()},
				AcceptMessageTypes: []rmqpb.MessageType{rmqpb.MessageType_NORMAL, rmqpb.MessageType_DELAY},
			}}
		}
		if !fifo {
			resp.Assignments = append(resp.Assignments, mq(-1))
			continue
		}
		for id := int32(0); id < qd.ReadQueueNums; id++ {
			resp.Assignments = append(resp.Assignments, mq(id))
		}
	}
	if len(resp.Assignments) == 0 {
		// An error (not an empty list) makes the clients keep the assignments they have and ask
		// again later: a group without a master is usually between two leaders.
		resp.Status = fail(rmqpb.Code_TOPIC_NOT_FOUND, "topic %s has no readable queue with a master", topic)
	}
	return resp, nil
}
