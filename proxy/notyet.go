package proxy

import (
	"context"

	"google.golang.org/grpc"

	"rocketraft/proxy/rmqpb"
)

// The RPCs the proxy does not serve yet answer in-band NOT_IMPLEMENTED, the way the clients
// read an application error, instead of a gRPC error status.

func notYet(rpc string) *rmqpb.Status {
	return fail(rmqpb.Code_NOT_IMPLEMENTED, "%s is not served by this proxy yet", rpc)
}

// NotifyClientTermination needs nothing: the proxy keeps no client state.
func (m *messaging) NotifyClientTermination(context.Context, *rmqpb.NotifyClientTerminationRequest) (*rmqpb.NotifyClientTerminationResponse, error) {
	return &rmqpb.NotifyClientTerminationResponse{Status: ok()}, nil
}

func (m *messaging) QueryAssignment(context.Context, *rmqpb.QueryAssignmentRequest) (*rmqpb.QueryAssignmentResponse, error) {
	return &rmqpb.QueryAssignmentResponse{Status: notYet("QueryAssignment")}, nil
}

func (m *messaging) ForwardMessageToDeadLetterQueue(context.Context, *rmqpb.ForwardMessageToDeadLetterQueueRequest) (*rmqpb.ForwardMessageToDeadLetterQueueResponse, error) {
	return &rmqpb.ForwardMessageToDeadLetterQueueResponse{Status: notYet("ForwardMessageToDeadLetterQueue")}, nil
}

func (m *messaging) PullMessage(_ *rmqpb.PullMessageRequest, stream grpc.ServerStreamingServer[rmqpb.PullMessageResponse]) error {
	return stream.Send(&rmqpb.PullMessageResponse{Content: &rmqpb.PullMessageResponse_Status{Status: notYet("PullMessage")}})
}

func (m *messaging) UpdateOffset(context.Context, *rmqpb.UpdateOffsetRequest) (*rmqpb.UpdateOffsetResponse, error) {
	return &rmqpb.UpdateOffsetResponse{Status: notYet("UpdateOffset")}, nil
}

func (m *messaging) GetOffset(context.Context, *rmqpb.GetOffsetRequest) (*rmqpb.GetOffsetResponse, error) {
	return &rmqpb.GetOffsetResponse{Status: notYet("GetOffset")}, nil
}

func (m *messaging) QueryOffset(context.Context, *rmqpb.QueryOffsetRequest) (*rmqpb.QueryOffsetResponse, error) {
	return &rmqpb.QueryOffsetResponse{Status: notYet("QueryOffset")}, nil
}

func (m *messaging) RecallMessage(context.Context, *rmqpb.RecallMessageRequest) (*rmqpb.RecallMessageResponse, error) {
	return &rmqpb.RecallMessageResponse{Status: notYet("RecallMessage")}, nil
}

func (m *messaging) SyncLiteSubscription(context.Context, *rmqpb.SyncLiteSubscriptionRequest) (*rmqpb.SyncLiteSubscriptionResponse, error) {
	return &rmqpb.SyncLiteSubscriptionResponse{Status: notYet("SyncLiteSubscription")}, nil
}
