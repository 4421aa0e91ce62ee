package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Topic and subscription group configs, learned from the brokers: a topic's message.type
// attribute decides which message types QueryRoute offers and SendMessage accepts (fifo.go); a
// group's consumeMessageOrderly makes its consumers FIFO (Telemetry settings, orderly POP). They
// are asked of a member of the topic's route (GET_TOPIC_CONFIG 351, GET_SUBSCRIPTIONGROUP_CONFIG
// 352; every member of a Raft group holds the replicated tables, the master is asked first) and
// kept for RouteTTL, as routes are.

// configCache keeps the configs; its zero value is ready.
type configCache struct {
	mu     sync.Mutex
	topics map[string]cachedConf[*protocol.TopicConfig]
	groups map[string]cachedConf[*protocol.SubscriptionGroupConfig]
}

type cachedConf[T any] struct {
	v  T // nil: the brokers do not know it
	at time.Time
}

// errNoConfig: no broker of the route answered the config request.
var errNoConfig = errors.New("no broker answered")

// topicConfig returns topic's config (nil: the brokers of its route lack it).
func (m *messaging) topicConfig(ctx context.Context, topic string) (*protocol.TopicConfig, error) {
	c := &m.confs
	c.mu.Lock()
	e, ok := c.topics[topic]
	c.mu.Unlock()
	if ok && time.Since(e.at) < m.cfg.RouteTTL {
		return e.v, nil
	}
	var tc *protocol.TopicConfig
	err := m.askRoute(ctx, topic, remoting.GetTopicConfig, map[string]string{"topic": topic}, remoting.TopicNotExist, func(body []byte) error {
		tc = &protocol.TopicConfig{}
		return protocol.Decode(body, tc)
	})
	if err != nil {
		return nil, fmt.Errorf("config of topic %s: %w", topic, err)
	}
	c.mu.Lock()
	if c.topics == nil {
		c.topics = map[string]cachedConf[*protocol.TopicConfig]{}
	}
	c.topics[topic] = cachedConf[*protocol.TopicConfig]{v: tc, at: time.Now()}
	c.mu.Unlock()
	return tc, nil
}

// groupConfig returns group's config from a broker of topic's route (nil: they lack it, so it
// has the defaults a broker would create it with).
func (m *messaging) groupConfig(ctx context.Context, group, topic string) (*protocol.SubscriptionGroupConfig, error) {
	c := &m.confs
	c.mu.Lock()
	e, ok := c.groups[group]
	c.mu.Unlock()
	if ok && time.Since(e.at) < m.cfg.RouteTTL {
		return e.v, nil
	}
	var gc *protocol.SubscriptionGroupConfig
	err := m.askRoute(ctx, topic, remoting.GetSubscriptionGroupConfig, map[string]string{"group": group}, remoting.SubscriptionGroupNotExist, func(body []byte) error {
		gc = protocol.NewSubscriptionGroupConfig(group)
		return protocol.Decode(body, gc)
	})
	if err != nil {
		return nil, fmt.Errorf("config of group %s: %w", group, err)
	}
	c.mu.Lock()
	if c.groups == nil {
		c.groups = map[string]cachedConf[*protocol.SubscriptionGroupConfig]{}
	}
	c.groups[group] = cachedConf[*protocol.SubscriptionGroupConfig]{v: gc, at: time.Now()}
	c.mu.Unlock()
	return gc, nil
}

// orderly reports whether group consumes orderly (false when its config cannot be read: the
// consumer then gets unordered POP, never an error).
func (m *messaging) orderly(ctx context.Context, group, topic string) bool {
	gc, err := m.groupConfig(ctx, group, topic)
	if err != nil {
		m.log.Debug("group config unknown; consuming unordered", "group", group, "error", err)
	}
	return gc != nil && gc.ConsumeMessageOrderly
}

// askRoute sends one request to the members of topic's route, masters first, until one
// answers SUCCESS (decode reads its body) or notFound (nil error, decode not called).
func (m *messaging) askRoute(ctx context.Context, topic string, code int32, ext map[string]string, notFound int32, decode func([]byte) error) error {
	r, err := m.routes.get(ctx, topic)
	if err != nil {
		return err
	}
	var addrs []string
	for _, bd := range r.BrokerDatas {
		if a := bd.MasterAddr(); a != "" {
			addrs = append(addrs, a)
		}
	}
	for _, bd := range r.BrokerDatas {
		for _, a := range bd.BrokerAddrs {
			if a != bd.MasterAddr() {
				addrs = append(addrs, a)
			}
		}
	}
	errs := []error{errNoConfig}
	for _, addr := range addrs {
		sctx, cancel := context.WithTimeout(ctx, m.cfg.SendTimeout)
		resp, err := m.cl.Invoke(sctx, addr, remoting.NewRequest(code, ext, nil))
		cancel()
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		case resp.Code == remoting.Success:
			if err := decode(resp.Body); err != nil {
				return fmt.Errorf("%s: decode: %w", addr, err)
			}
			return nil
		case resp.Code == notFound:
			return nil
		default:
			errs = append(errs, fmt.Errorf("%s: code %d %s", addr, resp.Code, resp.Remark))
		}
	}
	return errors.Join(errs...)
}
