package proxy

// Name validation: every topic and group a call names (namesOf, auth.go) is checked with the
// validators the brokers' admin commands use (package message) before the RPC runs
// (interceptors.go), so an invalid name is answered in-band ILLEGAL_TOPIC or
// ILLEGAL_CONSUMER_GROUP and reaches neither the proxy's own tables (client settings, routes)
// nor a broker. An empty name is left to the RPC, which says which field is required.

import (
	"rocketraft/message"
	"rocketraft/proxy/rmqpb"
)

// checkNames returns the status refusing req's first invalid name, or nil.
func checkNames(req any) *rmqpb.Status {
	for _, n := range namesOf(req) {
		if n.name == "" {
			continue
		}
		if n.group {
			if err := message.ValidateGroup(n.name); err != nil {
				return fail(rmqpb.Code_ILLEGAL_CONSUMER_GROUP, "invalid group: %v", err)
			}
			continue
		}
		if err := message.ValidateTopic(n.name); err != nil {
			return fail(rmqpb.Code_ILLEGAL_TOPIC, "invalid topic: %v", err)
		}
	}
	return nil
}
