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

// Producers' retry policy (Apache's proxy defaults): 3 attempts, exponential backoff from 10 ms
// to 1 s. The Node client cannot start without one in the Settings answer.
const (
	producerMaxAttempts    = 3
	producerBackoffInitial = 10 * time.Millisecond
	producerBackoffMax     = time.Second
	producerBackoffFactor  = 2
)

// serverSettings fills what the server decides in a client's Settings. A producer gets its retry
// policy. A consumer gets the receive batch size, the long-polling bound, whether the group is
// FIFO and its retry policy (max attempts and backoff, from the group's config on a broker of its
// first subscribed topic); the push consumer adopts these at its first Settings answer.
func (m *messaging) serverSettings(ctx context.Context, s *rmqpb.Settings) {
	if s.GetPublishing() != nil {
		s.BackoffPolicy = &rmqpb.RetryPolicy{MaxAttempts: producerMaxAttempts, Strategy: &rmqpb.RetryPolicy_ExponentialBackoff{
			ExponentialBackoff: &rmqpb.ExponentialBackoff{Initial: durationpb.New(producerBackoffInitial), Max: durationpb.New(producerBackoffMax), Multiplier: producerBackoffFactor},
		}}
		return
	}
	sub := s.GetSubscription()
	if sub == nil {
		return
	}
	// A client waits for this answer before it starts: the lookups below are bounded, and what
	// they cannot find is left to the client's defaults.
	ctx, cancel := context.WithTimeout(ctx, m.cfg.SendTimeout)
	defer cancel()
	group := sub.GetGroup().GetName()
	batch := int32(receiveBatchSize)
	sub.ReceiveBatchSize = &batch
	sub.LongPollingTimeout = durationpb.New(maxPollWindow)
	if group == "" || len(sub.GetSubscriptions()) == 0 {
		return // nothing to look up: the client keeps its own defaults until the next Settings
	}
	// The group's config is read through a broker of its first subscribed topic.
	topic := sub.GetSubscriptions()[0].GetTopic().GetName()
	gc, err := m.groupConfig(ctx, group, topic)
	if err != nil {
		m.log.Debug("group config unknown; the brokers' defaults apply", "group", group, "error", err)
	}
	fifo := gc != nil && gc.ConsumeMessageOrderly
	sub.Fifo = &fifo
	s.BackoffPolicy = backoffPolicy(gc)
}
