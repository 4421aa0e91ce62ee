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

// compressRegisterAbove is the size of a REGISTER_BROKER body (the topic table as JSON) above
// which it is sent compressed (header compressed=true, the layout of
// protocol.EncodeCompressedRegisterBrokerBody, which the name servers read, as RocketMQ's do)
// even without compressedRegister: a table of tens of thousands of topics is megabytes of JSON,
// sent every registration period.
const compressRegisterAbove = 1 << 20

// registerGapFactor: a registration triggered by a topic change waits, after the previous one
// ended, at least this many times as long as the previous one took (and at least
// metadataFlushIntervalMs), so registrations of a large table take a bounded share of the
// broker's and the name servers' time while topics are being created in a burst.
const registerGapFactor = 4

// triggerRegister asks the registration loop to register with every name server after a
// topic was created or changed: at once when the last registration is older than the
// coalescing gap (registerGap), else at the gap's end, with every change made meanwhile.
func (b *Broker) triggerRegister() {
	b.signalRegister()
}

// triggerRegisterNow registers without waiting for the coalescing gap: a role change (DLedger
// failover, classic master found) or a brokerPermission change must reach the name servers at
// once, whatever topics are being created.
func (b *Broker) triggerRegisterNow() {
	b.registerUrgent.Store(true)
	b.signalRegister()
}

func (b *Broker) signalRegister() {
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
	// lastEnd and lastTook describe the previous registration a topic change triggered: only
	// such a one starts a coalescing gap, so the first change after a periodic (or the start-up)
	// registration is registered at once, and only a burst waits.
	var lastEnd time.Time
	var lastTook time.Duration
	for {
		triggered := false
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.registerNow:
			triggered = true
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
			// Coalesce a burst of topic changes into one registration (registerGap); an urgent
			// trigger (triggerRegisterNow) ends the wait.
			deadline := lastEnd.Add(b.registerGap(lastTook))
			for !b.registerUrgent.Load() && time.Now().Before(deadline) {
				wait := time.NewTimer(time.Until(deadline))
				select {
				case <-b.stop:
					wait.Stop()
					return
				case <-wait.C:
				case <-b.registerNow: // more changes, in this registration too
				}
				wait.Stop()
			}
		}
		b.registerUrgent.Store(false)
		if b.sd.draining.Load() {
			continue // shutting down: unregistered, and staying so (shutdown.go)
		}
		if !b.place.registers() {
			// Nothing is registered before the first role decision;
			// watchRole triggers a registration as soon as there is one.
			t.Reset(retryDelay)
			continue
		}
		start := time.Now()
		ok := b.registerAll()
		if triggered {
			lastEnd = time.Now()
			lastTook = lastEnd.Sub(start)
		}
		if ok {
			t.Reset(period)
		} else {
			t.Reset(retryDelay)
		}
	}
}

// registerGap is how long after the previous registration ended a triggered one waits: the
// metadata flush interval, or registerGapFactor times the previous registration's duration if
// longer.
func (b *Broker) registerGap(lastTook time.Duration) time.Duration {
	return max(time.Duration(b.cfg.MetadataFlushIntervalMs)*time.Millisecond, registerGapFactor*lastTook)
}

// registrationBody is the topic table as the name server should see it: with
// a broker whose permission lacks read or write, every topic carries the
// broker's permission (how a broker is drained). compressed reports the compressed layout:
// with compressedRegister, or when the JSON is larger than compressRegisterAbove.
func (b *Broker) registrationBody() (body []byte, compressed bool) {
	w := b.topics.Wrapper()
	perm := b.rt.permission(b.cfg)
	if !protocol.IsReadable(perm) || !protocol.IsWriteable(perm) {
		for _, tc := range w.TopicConfigTable {
			tc.Perm = perm
		}
	}
	rb := protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: w, FilterServerList: []string{}}
	if !b.cfg.CompressedRegister && len(w.TopicConfigTable) < compressRegisterAbove/256 {
		// A topic is about 150-250 bytes of JSON: a table this small is not worth measuring
		// (a few KiB over the limit, with long attributes, cost nothing).
		return protocol.MustEncode(rb), false
	}
	plain := protocol.MustEncode(rb)
	if !b.cfg.CompressedRegister && len(plain) <= compressRegisterAbove {
		return plain, false
	}
	z, err := protocol.EncodeCompressedRegisterBrokerBody(&rb)
	if err != nil {
		b.logger.Warn("cannot compress the registration; sending it plain", "error", err)
		return plain, false
	}
	return z, true
}

func (b *Broker) identity() protocol.RegisterBrokerRequestHeader {
	return protocol.RegisterBrokerRequestHeader{
		BrokerName:   b.cfg.BrokerName,
		BrokerAddr:   b.brokerAddr,
		ClusterName:  b.cfg.BrokerClusterName,
		HaServerAddr: b.repl.AdvertisedAddr(),
		BrokerID:     b.brokerID(),
		// A DLedger node forwards writes to the leader whatever its role (forward.go), so the
		// name servers may publish it as a stand-in master while the group has none.
		ForwardsWrites: b.place.forwardsWrites(),
	}
}

// registerAll registers with every name server in parallel and reports
// whether all of them accepted; failures are logged.
func (b *Broker) registerAll() bool {
	body, compressed := b.registrationBody()
	h := b.identity()
	h.Compressed = compressed
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
				b.regLog.failed(b.logger, addr, "register with name server failed", "error", err)
				return
			}
			if resp.Code != remoting.Success {
				failed.Store(true)
				b.regLog.failed(b.logger, addr, "name server refused registration", "code", resp.Code, "remark", resp.Remark)
				return
			}
			b.logger.Debug("registered with name server", "namesrv", addr)
			b.regLog.ok(b.logger, addr)
			b.repl.OnRegisterAnswer(resp) // a slave learns its master here
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
