package broker

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"rocketraft/broker/meta"
	"rocketraft/config"
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

// registrar keeps this broker registered with every name server: periodically, at once after a
// role or permission change, and after topic changes coalesced into bounded bursts. It owns the
// registration loop and its failure log so the rest of the broker only triggers it. It exists
// from the start of New (Raft's replay triggers registrations while the place opens); its
// registrarDeps are wired once the place and the name-server client exist, before run.
type registrar struct {
	registrarDeps

	// now wakes the loop; urgent says the pending registration must not wait for the
	// coalescing gap (triggerNow).
	now    chan struct{}
	urgent atomic.Bool
	log    registerLog // collapses repeated registration failures (registerlog.go)
}

// registrarDeps is what registering reads and calls.
type registrarDeps struct {
	cfg    *config.Broker
	logger hclog.Logger
	topics *meta.Topics
	// place says whether the node has a role to register yet, its broker id and whether it
	// forwards writes.
	place place
	// invoke sends one request to a name server (the name-server client's Invoke).
	invoke func(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error)
	// addr is the advertised broker address (known once the port listens), perm the
	// brokerPermission now, haAddr the HA server's advertised address.
	addr   func() string
	perm   func() int32
	haAddr func() string
	// onAnswer hands a name server's accepting answer to classic replication (a slave learns
	// its master there); draining reports a graceful shutdown, which registers no more.
	onAnswer func(*remoting.Command)
	draining func() bool
}

// newRegistrar is a registrar that takes triggers; its deps are set before run.
func newRegistrar() *registrar {
	return &registrar{now: make(chan struct{}, 1)}
}

// trigger asks the registration loop to register with every name server after a
// topic was created or changed: at once when the last registration is older than the
// coalescing gap (gap), else at the gap's end, with every change made meanwhile.
func (r *registrar) trigger() {
	r.signal()
}

// triggerNow registers without waiting for the coalescing gap: a role change (DLedger
// failover, classic master found) or a brokerPermission change must reach the name servers at
// once, whatever topics are being created.
func (r *registrar) triggerNow() {
	r.urgent.Store(true)
	r.signal()
}

// signal wakes the loop without blocking: one pending wake-up covers any number of triggers.
func (r *registrar) signal() {
	select {
	case r.now <- struct{}{}:
	default:
	}
}

// run is the registration loop; it returns when stop is closed.
func (r *registrar) run(stop <-chan struct{}) {
	period := time.Duration(r.cfg.RegisterNameServerPeriod) * time.Millisecond
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
		case <-stop:
			return
		case <-t.C:
		case <-r.now:
			triggered = true
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
			// Coalesce a burst of topic changes into one registration (gap); an urgent
			// trigger (triggerNow) ends the wait.
			if !r.waitGap(stop, lastEnd.Add(r.gap(lastTook))) {
				return
			}
		}
		r.urgent.Store(false)
		if r.draining() {
			continue // shutting down: unregistered, and staying so (shutdown.go)
		}
		if !r.place.registers() {
			// Nothing is registered before the first role decision;
			// watchRole triggers a registration as soon as there is one.
			t.Reset(retryDelay)
			continue
		}
		start := time.Now()
		ok := r.registerAll()
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

// waitGap waits until deadline, taking in the triggers that arrive meanwhile, or until an
// urgent trigger; false when stop closed first.
func (r *registrar) waitGap(stop <-chan struct{}, deadline time.Time) bool {
	for !r.urgent.Load() && time.Now().Before(deadline) {
		wait := time.NewTimer(time.Until(deadline))
		select {
		case <-stop:
			wait.Stop()
			return false
		case <-wait.C:
		case <-r.now: // more changes, in this registration too
		}
		wait.Stop()
	}
	return true
}

// gap is how long after the previous registration ended a triggered one waits: the
// metadata flush interval, or registerGapFactor times the previous registration's duration if
// longer.
func (r *registrar) gap(lastTook time.Duration) time.Duration {
	return max(time.Duration(r.cfg.MetadataFlushIntervalMs)*time.Millisecond, registerGapFactor*lastTook)
}

// body is the topic table as the name server should see it: with
// a broker whose permission lacks read or write, every topic carries the
// broker's permission (how a broker is drained). compressed reports the compressed layout:
// with compressedRegister, or when the JSON is larger than compressRegisterAbove.
func (r *registrar) body() (body []byte, compressed bool) {
	w := r.topics.Wrapper()
	perm := r.perm()
	if !protocol.IsReadable(perm) || !protocol.IsWriteable(perm) {
		for _, tc := range w.TopicConfigTable {
			tc.Perm = perm
		}
	}
	rb := protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: w, FilterServerList: []string{}}
	if !r.cfg.CompressedRegister && len(w.TopicConfigTable) < compressRegisterAbove/256 {
		// A topic is about 150-250 bytes of JSON: a table this small is not worth measuring
		// (a few KiB over the limit, with long attributes, cost nothing).
		return protocol.MustEncode(rb), false
	}
	plain := protocol.MustEncode(rb)
	if !r.cfg.CompressedRegister && len(plain) <= compressRegisterAbove {
		return plain, false
	}
	z, err := protocol.EncodeCompressedRegisterBrokerBody(&rb)
	if err != nil {
		r.logger.Warn("cannot compress the registration; sending it plain", "error", err)
		return plain, false
	}
	return z, true
}

// identity is the REGISTER_BROKER header naming this node and its role now.
func (r *registrar) identity() protocol.RegisterBrokerRequestHeader {
	return protocol.RegisterBrokerRequestHeader{
		BrokerName:   r.cfg.BrokerName,
		BrokerAddr:   r.addr(),
		ClusterName:  r.cfg.BrokerClusterName,
		HaServerAddr: r.haAddr(),
		BrokerID:     r.place.brokerID(),
		// A DLedger node forwards writes to the leader whatever its role (forward.go), so the
		// name servers may publish it as a stand-in master while the group has none.
		ForwardsWrites: r.place.forwardsWrites(),
	}
}

// registerAll registers with every name server in parallel and reports
// whether all of them accepted; failures are logged.
func (r *registrar) registerAll() bool {
	body, compressed := r.body()
	h := r.identity()
	h.Compressed = compressed
	ext := h.ToExt()
	ext["bodyCrc32"] = strconv.FormatInt(int64(protocol.CRC32(body)), 10)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, addr := range r.cfg.NamesrvAddrs() {
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
			defer cancel()
			resp, err := r.invoke(ctx, addr, remoting.NewRequest(remoting.RegisterBroker, copyExt(ext), body))
			if err != nil {
				failed.Store(true)
				r.log.failed(r.logger, addr, "register with name server failed", "error", err)
				return
			}
			if resp.Code != remoting.Success {
				failed.Store(true)
				r.log.failed(r.logger, addr, "name server refused registration", "code", resp.Code, "remark", resp.Remark)
				return
			}
			r.logger.Debug("registered with name server", "namesrv", addr)
			r.log.ok(r.logger, addr)
			r.onAnswer(resp) // a slave learns its master here
		}(addr)
	}
	wg.Wait()
	return !failed.Load()
}

// unregisterAll takes this node off every name server (shutdown, a failed disk, removal from
// its Raft group), in parallel; failures are logged.
func (r *registrar) unregisterAll() {
	h := protocol.BrokerIdentityHeader{BrokerName: r.cfg.BrokerName, BrokerAddr: r.addr(), ClusterName: r.cfg.BrokerClusterName, BrokerID: r.place.brokerID()}
	var wg sync.WaitGroup
	for _, addr := range r.cfg.NamesrvAddrs() {
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if _, err := r.invoke(ctx, addr, remoting.NewRequest(remoting.UnregisterBroker, h.ToExt(), nil)); err != nil {
				r.logger.Warn("unregister from name server failed", "namesrv", addr, "error", err)
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
