package broker

// UPDATE_BROKER_CONFIG (25): configuration over the wire is limited to the keys below, whatever
// the ACL setting (with aclEnable the request also needs an admin account). Everything else in
// broker.properties is read at start: changing store paths, ports, Raft settings or the ACL
// keys of a running broker either cannot take effect or would let one request turn security
// off. A request naming any other key is refused whole with NO_PERMISSION (16), for admins
// too; a bad value is INVALID_PARAMETER (29). Nothing is applied unless every pair is valid.
// The change lives in memory only (a restart reads broker.properties again) and, in a DLedger
// group, on the node that received it, as in RocketMQ where each broker keeps its own config.
//
// The body is Java's properties text ("key=value" lines), as mqadmin updateBrokerConfig sends.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/magiconair/properties"

	"rocketraft/remoting"
)

// runtimeConfig holds the values UPDATE_BROKER_CONFIG set, which override broker.properties.
// Its zero value overrides nothing, so a Broker built without New (tests) reads its config.
type runtimeConfig struct {
	perm    atomic.Int32
	permSet atomic.Bool
	// slaveRead: 0 = not set, 1 = false, 2 = true.
	slaveRead atomic.Int32
}

// brokerPermission is brokerPermission as currently set.
func (b *Broker) brokerPermission() int32 {
	if b.rt.permSet.Load() {
		return b.rt.perm.Load()
	}
	return int32(b.cfg.BrokerPermission)
}

// slaveReadEnabled is slaveReadEnable as currently set.
func (b *Broker) slaveReadEnabled() bool {
	switch b.rt.slaveRead.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	return b.cfg.SlaveReadEnable
}

// runtimeKey is one key UPDATE_BROKER_CONFIG may change: parse validates a value and returns
// the function that applies it.
type runtimeKey struct {
	name  string
	parse func(b *Broker, v string) (func(), error)
}

// RuntimeConfigKeys lists the keys UPDATE_BROKER_CONFIG accepts, for docs/operations.md and tests.
var RuntimeConfigKeys = []string{"brokerPermission", "logLevel", "slaveReadEnable"}

var runtimeKeys = map[string]runtimeKey{
	// brokerPermission drains a broker (6 -> 4: no new writes) or brings it back; the name
	// servers learn it with the registration triggered at once.
	"brokerPermission": {"brokerPermission", func(b *Broker, v string) (func(), error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n&^0xF != 0 {
			return nil, fmt.Errorf("brokerPermission must combine READ 4, WRITE 2, INHERIT 1 (PRIORITY 8), got %q", v)
		}
		return func() { b.rt.perm.Store(int32(n)); b.rt.permSet.Store(true); b.reg.triggerNow() }, nil
	}},
	"slaveReadEnable": {"slaveReadEnable", func(b *Broker, v string) (func(), error) {
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("slaveReadEnable must be true or false, got %q", v)
		}
		return func() {
			if on {
				b.rt.slaveRead.Store(2)
			} else {
				b.rt.slaveRead.Store(1)
			}
		}, nil
	}},
	"logLevel": {"logLevel", func(b *Broker, v string) (func(), error) {
		lvl := strings.ToLower(strings.TrimSpace(v))
		switch lvl {
		case "debug", "info", "warn", "error":
		default:
			return nil, fmt.Errorf("logLevel must be debug, info, warn or error, got %q", v)
		}
		return func() { b.logger.SetLevel(hclog.LevelFromString(lvl)) }, nil
	}},
}

// handleUpdateBrokerConfig serves UPDATE_BROKER_CONFIG for the allow-listed keys.
func (b *Broker) handleUpdateBrokerConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
	props, err := properties.Load(req.Body, properties.UTF8)
	if err != nil {
		return req.NewResponse(remoting.InvalidParameter, "UPDATE_BROKER_CONFIG body is not properties text: "+err.Error())
	}
	keys := props.Keys()
	if len(keys) == 0 {
		return req.NewResponse(remoting.InvalidParameter, "UPDATE_BROKER_CONFIG body names no key")
	}
	sort.Strings(keys)
	var refused []string
	for _, k := range keys {
		if _, ok := runtimeKeys[k]; !ok {
			refused = append(refused, k)
		}
	}
	if len(refused) > 0 {
		return req.NewResponse(remoting.NoPermission, fmt.Sprintf(
			"UPDATE_BROKER_CONFIG refused: %s cannot be changed over the wire (only %s can; the rest of broker.properties is read at start)",
			strings.Join(refused, ", "), strings.Join(RuntimeConfigKeys, ", ")))
	}
	apply := make([]func(), 0, len(keys))
	for _, k := range keys {
		v, _ := props.Get(k)
		f, err := runtimeKeys[k].parse(b, v)
		if err != nil {
			return req.NewResponse(remoting.InvalidParameter, err.Error())
		}
		apply = append(apply, f)
	}
	for i, f := range apply {
		f()
		v, _ := props.Get(keys[i])
		b.logger.Info("broker config changed at runtime", "key", keys[i], "value", v)
	}
	return req.NewResponse(remoting.Success, "")
}
