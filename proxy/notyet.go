package proxy

import (
	"context"

	"rocketraft/proxy/rmqpb"
)

// The RPCs the proxy does not serve yet answer in-band NOT_IMPLEMENTED, the way the clients
// read an application error, instead of a gRPC error status.

func notYet(rpc string) *rmqpb.Status {
	return fail(rmqpb.Code_NOT_IMPLEMENTED, "%s is not served by this proxy yet", rpc)
}

// NotifyClientTermination needs nothing more: a client leaves the registry (clients.go) when its
// Telemetry stream ends, which follows this call.
func (m *messaging) NotifyClientTermination(context.Context, *rmqpb.NotifyClientTerminationRequest) (*rmqpb.NotifyClientTerminationResponse, error) {
	return &rmqpb.NotifyClientTerminationResponse{Status: ok()}, nil
}

// RecallMessage would cancel a delayed message before its time. The brokers' timer (delay levels
// in broker/schedule) keeps no index a message could be removed from, so there is nothing to
// map it onto; SendMessage hands out no recall handle either.
func (m *messaging) RecallMessage(context.Context, *rmqpb.RecallMessageRequest) (*rmqpb.RecallMessageResponse, error) {
	return &rmqpb.RecallMessageResponse{Status: fail(rmqpb.Code_NOT_IMPLEMENTED,
		"RecallMessage is not served: the brokers cannot cancel a delayed message once stored")}, nil
}

func (m *messaging) SyncLiteSubscription(context.Context, *rmqpb.SyncLiteSubscriptionRequest) (*rmqpb.SyncLiteSubscriptionResponse, error) {
	return &rmqpb.SyncLiteSubscriptionResponse{Status: notYet("SyncLiteSubscription")}, nil
}
