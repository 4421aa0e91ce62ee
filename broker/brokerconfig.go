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

	"rocketraft/config"
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

// permission is brokerPermission as currently set: the runtime value, else cfg's.
func (r *runtimeConfig) permission(cfg *config.Broker) int32 {
	if r.permSet.Load() {
		return r.perm.Load()
	}
	return int32(cfg.BrokerPermission)
}

// slaveReadEnabled is slaveReadEnable as currently set: the runtime value, else cfg's.
func (r *runtimeConfig) slaveReadEnabled(cfg *config.Broker) bool {
	switch r.slaveRead.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	return cfg.SlaveReadEnable
}

// setPermission overrides brokerPermission until the process ends.
func (r *runtimeConfig) setPermission(perm int32) {
	r.perm.Store(perm)
	r.permSet.Store(true)
}

// setSlaveRead overrides slaveReadEnable until the process ends.
func (r *runtimeConfig) setSlaveRead(on bool) {
	if on {
		r.slaveRead.Store(2)
	} else {
		r.slaveRead.Store(1)
	}
}

// runtimeSetter is what the runtime keys change, so each key's parser can be checked against a
// recording fake; configHandlers is the real one.
type runtimeSetter interface {
	setPermission(perm int32)
	setSlaveRead(on bool)
	setLogLevel(lvl hclog.Level)
}

// runtimeKey is one key UPDATE_BROKER_CONFIG may change: parse validates a value and returns
// the function that applies it.
type runtimeKey struct {
	name  string
	parse func(s runtimeSetter, v string) (func(), error)
}

// RuntimeConfigKeys lists the keys UPDATE_BROKER_CONFIG accepts, for docs/operations.md and tests.
var RuntimeConfigKeys = []string{"brokerPermission", "logLevel", "slaveReadEnable"}

var runtimeKeys = map[string]runtimeKey{
	// brokerPermission drains a broker (6 -> 4: no new writes) or brings it back; the name
	// servers learn it with the registration triggered at once.
	"brokerPermission": {"brokerPermission", func(s runtimeSetter, v string) (func(), error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n&^0xF != 0 {
			return nil, fmt.Errorf("brokerPermission must combine READ 4, WRITE 2, INHERIT 1 (PRIORITY 8), got %q", v)
		}
		return func() { s.setPermission(int32(n)) }, nil
	}},
	"slaveReadEnable": {"slaveReadEnable", func(s runtimeSetter, v string) (func(), error) {
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("slaveReadEnable must be true or false, got %q", v)
		}
		return func() { s.setSlaveRead(on) }, nil
	}},
	"logLevel": {"logLevel", func(s runtimeSetter, v string) (func(), error) {
		lvl := strings.ToLower(strings.TrimSpace(v))
		switch lvl {
		case "debug", "info", "warn", "error":
		default:
			return nil, fmt.Errorf("logLevel must be debug, info, warn or error, got %q", v)
		}
		return func() { s.setLogLevel(hclog.LevelFromString(lvl)) }, nil
	}},
}

// configHandlers answers GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG: the file's configuration
// with the runtime overrides it owns (rt) and the logger's level, which UPDATE_BROKER_CONFIG
// changes in place.
type configHandlers struct {
	cfg    *config.Broker
	rt     *runtimeConfig
	logger hclog.Logger
	// brokerID is the node's id as registered (GET_BROKER_CONFIG's brokerId header).
	brokerID func() int64
	// triggerRegisterNow tells the name servers a new brokerPermission without waiting.
	triggerRegisterNow func()
}

// setPermission applies brokerPermission and registers it at once: a drain must reach the name
// servers before producers stop sending here.
func (h *configHandlers) setPermission(perm int32) {
	h.rt.setPermission(perm)
	h.triggerRegisterNow()
}

// setSlaveRead applies slaveReadEnable.
func (h *configHandlers) setSlaveRead(on bool) { h.rt.setSlaveRead(on) }

// setLogLevel applies logLevel to the broker's logger (and the loggers named from it).
func (h *configHandlers) setLogLevel(lvl hclog.Level) { h.logger.SetLevel(lvl) }

// handleUpdateBrokerConfig serves UPDATE_BROKER_CONFIG for the allow-listed keys.
func (h *configHandlers) handleUpdateBrokerConfig(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
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
		f, err := runtimeKeys[k].parse(h, v)
		if err != nil {
			return req.NewResponse(remoting.InvalidParameter, err.Error())
		}
		apply = append(apply, f)
	}
	for i, f := range apply {
		f()
		v, _ := props.Get(keys[i])
		h.logger.Info("broker config changed at runtime", "key", keys[i], "value", v)
	}
	return req.NewResponse(remoting.Success, "")
}
