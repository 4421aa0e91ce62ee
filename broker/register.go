package broker

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// registerTimeout bounds one REGISTER_BROKER call (registerBrokerTimeoutMills is 24 s).
const registerTimeout = 6 * time.Second

// triggerRegister asks the registration loop to register with every name
// server now, after a topic was created or changed.
func (b *Broker) triggerRegister() {
	select {
	case b.registerNow <- struct{}{}:
	default:
	}
}

func (b *Broker) registerLoop() {
	defer b.wg.Done()
	period := time.Duration(b.cfg.RegisterNameServerPeriod) * time.Millisecond
	period = max(10*time.Second, min(period, 60*time.Second))
	// Until every name server has accepted a registration (say, the broker
	// started before them), retry every retryDelay instead of waiting a whole
	// period with no route for clients.
	const retryDelay = time.Second
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.registerNow:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		if b.sd.draining.Load() {
			continue // shutting down: unregistered, and staying so (shutdown.go)
		}
		if b.raft != nil && b.role.get() == roleUnknown {
			// Nothing is registered before the first role decision (protocol doc §8.3);
			// watchRole triggers a registration as soon as there is one.
			t.Reset(retryDelay)
			continue
		}
		if b.registerAll() {
			t.Reset(period)
		} else {
			t.Reset(retryDelay)
		}
	}
}

// registrationBody is the topic table as the name server should see it: with
// a broker whose permission lacks read or write, every topic carries the
// broker's permission (how a broker is drained).
func (b *Broker) registrationBody() []byte {
	w := b.topics.Wrapper()
	perm := b.brokerPermission()
	if !protocol.IsReadable(perm) || !protocol.IsWriteable(perm) {
		for _, tc := range w.TopicConfigTable {
			tc.Perm = perm
		}
	}
	return protocol.MustEncode(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: w, FilterServerList: []string{}})
}

func (b *Broker) identity() protocol.RegisterBrokerRequestHeader {
	return protocol.RegisterBrokerRequestHeader{
		BrokerName:   b.cfg.BrokerName,
		BrokerAddr:   b.brokerAddr,
		ClusterName:  b.cfg.BrokerClusterName,
		HaServerAddr: b.haAdvertisedAddr(),
		BrokerID:     b.brokerID(),
		// A DLedger node forwards writes to the leader whatever its role (forward.go), so the
		// name servers may publish it as a stand-in master while the group has none.
		ForwardsWrites: b.raft != nil,
	}
}

// registerAll registers with every name server in parallel and reports
// whether all of them accepted; failures are logged.
func (b *Broker) registerAll() bool {
	body := b.registrationBody()
	h := b.identity()
	ext := h.ToExt()
	ext["bodyCrc32"] = strconv.FormatInt(int64(protocol.CRC32(body)), 10)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, addr := range b.cfg.NamesrvAddrs() {
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
			defer cancel()
			resp, err := b.nsClient.Invoke(ctx, addr, remoting.NewRequest(remoting.RegisterBroker, copyExt(ext), body))
			if err != nil {
				failed.Store(true)
				b.logger.Warn("register with name server failed", "namesrv", addr, "error", err)
				return
			}
			if resp.Code != remoting.Success {
				failed.Store(true)
				b.logger.Warn("name server refused registration", "namesrv", addr, "code", resp.Code, "remark", resp.Remark)
				return
			}
			b.logger.Debug("registered with name server", "namesrv", addr)
			b.onRegisterAnswer(resp) // a slave learns its master here
		}(addr)
	}
	wg.Wait()
	return !failed.Load()
}

func (b *Broker) unregisterAll() {
	h := protocol.BrokerIdentityHeader{BrokerName: b.cfg.BrokerName, BrokerAddr: b.brokerAddr, ClusterName: b.cfg.BrokerClusterName, BrokerID: b.brokerID()}
	var wg sync.WaitGroup
	for _, addr := range b.cfg.NamesrvAddrs() {
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if _, err := b.nsClient.Invoke(ctx, addr, remoting.NewRequest(remoting.UnregisterBroker, h.ToExt(), nil)); err != nil {
				b.logger.Warn("unregister from name server failed", "namesrv", addr, "error", err)
			}
		}(addr)
	}
	wg.Wait()
}

func copyExt(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
