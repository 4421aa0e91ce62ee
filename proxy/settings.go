package proxy

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"rocketraft/proxy/rmqpb"
)

// receiveBatchSize is how many messages a push consumer asks for per ReceiveMessage (the brokers'
// POP limit).
const receiveBatchSize = 32

// defaultAutoRenewInvisible is the invisible time of messages a push consumer receives: it sets
// auto_renew and no invisible duration, and acks or nacks each message when its listener returns.
const defaultAutoRenewInvisible = 60 * time.Second

// subscriptionSettings fills what the server decides in a consumer's Settings: the receive batch
// size, the long-polling bound, whether the group is FIFO and its retry policy (max attempts and
// backoff, from the group's config on a broker of its first subscribed topic). The push consumer
// adopts these at its first Settings answer.
func (m *messaging) subscriptionSettings(ctx context.Context, s *rmqpb.Settings) {
	sub := s.GetSubscription()
	if sub == nil {
		return
	}
	group := sub.GetGroup().GetName()
	batch := int32(receiveBatchSize)
	fifo := m.groupOrderly(ctx, group)
	sub.ReceiveBatchSize, sub.Fifo = &batch, &fifo
	sub.LongPollingTimeout = durationpb.New(maxPollWindow)
	addr := ""
	for _, e := range sub.GetSubscriptions() {
		if a, err := m.masterOf(ctx, e.GetTopic().GetName(), ""); err == nil {
			addr = a
			break
		}
	}
	if addr == "" {
		return // no topic with a master: the client keeps its own defaults until the next Settings
	}
	s.BackoffPolicy = backoffPolicy(m.groupConfig(ctx, addr, group))
}
