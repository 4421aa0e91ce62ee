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

// routeCache keeps each topic's route from the name servers for a short time (RouteTTL): which
// groups and queues a topic has. Which node of a group is its master is the leader book's
// business (leaders.go), which every route fetched here also feeds.
type routeCache struct {
	cfg     *Config
	cl      *remoting.Client
	leaders *leaderBook
	mu      sync.Mutex
	m       map[string]cachedRoute
}

type cachedRoute struct {
	r  *protocol.TopicRouteData
	at time.Time
}

// errNoRoute: no name server knows the topic.
var errNoRoute = errors.New("topic not found")

func newRouteCache(cfg *Config, cl *remoting.Client, leaders *leaderBook) *routeCache {
	return &routeCache{cfg: cfg, cl: cl, leaders: leaders, m: map[string]cachedRoute{}}
}

// get returns topic's route, asking the name servers if the cached one is older than RouteTTL.
func (c *routeCache) get(ctx context.Context, topic string) (*protocol.TopicRouteData, error) {
	c.mu.Lock()
	e, ok := c.m[topic]
	c.mu.Unlock()
	if ok && time.Since(e.at) < c.cfg.RouteTTL {
		return e.r, nil
	}
	r, err := fetchRoute(ctx, c.cfg, c.cl, topic)
	if err != nil {
		return nil, err
	}
	c.leaders.observeRoute(r)
	c.mu.Lock()
	c.m[topic] = cachedRoute{r: r, at: time.Now()}
	c.mu.Unlock()
	return r, nil
}

// routeMaster is the master address of group brokerName in r ("": the first group with a
// master), or "" when the route names none.
func routeMaster(r *protocol.TopicRouteData, brokerName string) string {
	for _, bd := range r.BrokerDatas {
		if bd.BrokerName == brokerName || brokerName == "" {
			if a := bd.MasterAddr(); a != "" {
				return a
			}
		}
	}
	return ""
}

// fetchRoute asks each name server in turn for topic's route.
func fetchRoute(ctx context.Context, cfg *Config, cl *remoting.Client, topic string) (*protocol.TopicRouteData, error) {
	var errs []error
	for _, ns := range cfg.nameServers() {
		req := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil)
		resp, err := cl.Invoke(ctx, ns, req)
		if err != nil {
			errs = append(errs, fmt.Errorf("name server %s: %w", ns, err))
			continue
		}
		if resp.Code == remoting.TopicNotExist {
			return nil, fmt.Errorf("%w: %s", errNoRoute, topic)
		}
		if resp.Code != remoting.Success {
			errs = append(errs, fmt.Errorf("name server %s: code %d %s", ns, resp.Code, resp.Remark))
			continue
		}
		var r protocol.TopicRouteData
		if err := protocol.Decode(resp.Body, &r); err != nil {
			errs = append(errs, fmt.Errorf("name server %s: route of %s: %w", ns, topic, err))
			continue
		}
		return &r, nil
	}
	return nil, fmt.Errorf("route of %s: %w", topic, errors.Join(errs...))
}
