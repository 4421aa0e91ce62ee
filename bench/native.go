package bench

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

// Client implementations selectable with Common.Client.
const (
	// ClientOfficial drives the broker through the official Go client
	// (github.com/apache/rocketmq-client-go/v2), as applications do.
	ClientOfficial = "official"
	// ClientNative speaks the remoting protocol directly through this
	// repository's own packages (rocketraft/remoting, protocol, message),
	// which costs the tool a few µs of CPU per request instead of the
	// official client's tens, so that the broker, not the tool, is measured.
	ClientNative = "native"
)

// defaultTopic is the template topic of auto-creation.
const defaultTopic = "TBW102"

// defaultTopicQueueNums is the queue count clients ask for when a topic is
// auto-created from defaultTopic (the official clients send 4).
const defaultTopicQueueNums = 4

// nativeRouteWait bounds how long a native producer waits for a route to
// the topic or to defaultTopic.
const nativeRouteWait = 30 * time.Second

// nativeRPCTimeout bounds route and offset look-ups of the native client.
const nativeRPCTimeout = 3 * time.Second

// errNoRoute tells that the name servers know no route for a topic.
var errNoRoute = errors.New("no route")

// validateClient checks c.Client and c.Connections, filling in defaults.
func (c *Common) validateClient() error {
	switch c.Client {
	case "":
		c.Client = ClientOfficial
	case ClientOfficial, ClientNative:
	case ClientGRPC:
		if c.Endpoint == "" {
			return fmt.Errorf("--client grpc needs --endpoint (the proxy's gRPC address)")
		}
	default:
		return fmt.Errorf("unknown client %q (want official, native or grpc)", c.Client)
	}
	if c.Connections < 1 {
		c.Connections = 2
	}
	return nil
}

// fetchRoute asks the name servers, in order, for topic's route. It returns
// an error wrapping errNoRoute when they answer TOPIC_NOT_EXIST.
func fetchRoute(ctx context.Context, cl *remoting.Client, ns []string, topic string) (*protocol.TopicRouteData, error) {
	var lastErr error
	for _, addr := range ns {
		h := protocol.GetRouteInfoRequestHeader{Topic: topic}
		rctx, cancel := context.WithTimeout(ctx, nativeRPCTimeout)
		resp, err := cl.Invoke(rctx, addr, remoting.NewRequest(remoting.GetRouteInfoByTopic, h.ToExt(), nil))
		cancel()
		switch {
		case err != nil:
			lastErr = fmt.Errorf("route of %s from %s: %w", topic, addr, err)
			continue
		case resp.Code == remoting.TopicNotExist:
			lastErr = fmt.Errorf("route of %s from %s: %w (%s)", topic, addr, errNoRoute, resp.Remark)
			continue
		case resp.Code != remoting.Success:
			lastErr = fmt.Errorf("route of %s from %s: code %d %s", topic, addr, resp.Code, resp.Remark)
			continue
		}
		var rd protocol.TopicRouteData
		if err := protocol.Decode(resp.Body, &rd); err != nil {
			return nil, fmt.Errorf("route of %s from %s: %w", topic, addr, err)
		}
		rd.Sort()
		return &rd, nil
	}
	return nil, lastErr
}

// nativeQueue is one message queue and the broker address serving it.
type nativeQueue struct {
	broker string
	addr   string
	id     int32
	idStr  string // id in decimal, for headers
}

// brokerAddrs maps broker names to their BrokerData.
func brokerAddrs(rd *protocol.TopicRouteData) map[string]*protocol.BrokerData {
	m := make(map[string]*protocol.BrokerData, len(rd.BrokerDatas))
	for _, b := range rd.BrokerDatas {
		m[b.BrokerName] = b
	}
	return m
}

// publishQueues lists the queues a producer sends to:
// queue ids 0..writeQueueNums-1 of every writable broker that has a master,
// ordered by broker name, with at most limit queues per broker (0: no limit).
func publishQueues(rd *protocol.TopicRouteData, limit int32) []nativeQueue {
	brokers := brokerAddrs(rd)
	var qs []nativeQueue
	for _, qd := range rd.QueueDatas {
		b := brokers[qd.BrokerName]
		if !protocol.IsWriteable(qd.Perm) || b == nil || b.MasterAddr() == "" {
			continue
		}
		n := qd.WriteQueueNums
		if limit > 0 {
			n = min(n, limit)
		}
		for i := int32(0); i < n; i++ {
			qs = append(qs, nativeQueue{broker: qd.BrokerName, addr: b.MasterAddr(), id: i, idStr: strconv.Itoa(int(i))})
		}
	}
	return qs
}

// subscribeQueues lists the queues a consumer pulls from, as RocketMQ's
// clients choose them: queue ids 0..readQueueNums-1 of every readable broker, pulled from
// the master, or from any member when the group has no master.
func subscribeQueues(rd *protocol.TopicRouteData) []nativeQueue {
	brokers := brokerAddrs(rd)
	var qs []nativeQueue
	for _, qd := range rd.QueueDatas {
		b := brokers[qd.BrokerName]
		if !protocol.IsReadable(qd.Perm) || b == nil {
			continue
		}
		addr := b.MasterAddr()
		if addr == "" {
			ids := make([]int64, 0, len(b.BrokerAddrs))
			for id := range b.BrokerAddrs {
				ids = append(ids, id)
			}
			if len(ids) == 0 {
				continue
			}
			sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
			addr = b.BrokerAddrs[ids[0]]
		}
		for i := int32(0); i < qd.ReadQueueNums; i++ {
			qs = append(qs, nativeQueue{broker: qd.BrokerName, addr: addr, id: i, idStr: strconv.Itoa(int(i))})
		}
	}
	return qs
}

// newRemotingClients returns n remoting clients, each of which will hold its
// own connection to every broker. They keep the answers' fields flat (the tool
// reads them through Command's methods only), sparing a map per answer on a
// machine the tool shares with the brokers.
func newRemotingClients(n int) []*remoting.Client {
	cls := make([]*remoting.Client, n)
	for i := range cls {
		cls[i] = remoting.NewClient(remoting.ClientConfig{FlatExtResponses: true})
	}
	return cls
}

func closeRemotingClients(cls []*remoting.Client) {
	for _, c := range cls {
		_ = c.Close()
	}
}

// responseCodeName names the response codes a benchmark is likely to see.
func responseCodeName(code int32) string {
	switch code {
	case remoting.Success:
		return "SUCCESS"
	case remoting.SystemError:
		return "SYSTEM_ERROR"
	case remoting.SystemBusy:
		return "SYSTEM_BUSY"
	case remoting.RequestCodeNotSupported:
		return "REQUEST_CODE_NOT_SUPPORTED"
	case remoting.FlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case remoting.SlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	case remoting.FlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case remoting.MessageIllegal:
		return "MESSAGE_ILLEGAL"
	case remoting.ServiceNotAvailable:
		return "SERVICE_NOT_AVAILABLE"
	case remoting.NoPermission:
		return "NO_PERMISSION"
	case remoting.TopicNotExist:
		return "TOPIC_NOT_EXIST"
	case remoting.PullNotFound:
		return "PULL_NOT_FOUND"
	case remoting.PullRetryImmediately:
		return "PULL_RETRY_IMMEDIATELY"
	case remoting.PullOffsetMoved:
		return "PULL_OFFSET_MOVED"
	case remoting.SubscriptionParseFailed:
		return "SUBSCRIPTION_PARSE_FAILED"
	case remoting.SubscriptionNotExist:
		return "SUBSCRIPTION_NOT_EXIST"
	case remoting.SubscriptionGroupNotExist:
		return "SUBSCRIPTION_GROUP_NOT_EXIST"
	case remoting.InvalidParameter:
		return "INVALID_PARAMETER"
	default:
		return "CODE_" + strconv.Itoa(int(code))
	}
}

// uniqIDs hands out message ids for UNIQ_KEY: 32 hex digits, a random
// per-run prefix followed by a counter, so that ids are unique without the
// official client's per-message time and hashing work.
type uniqIDs struct {
	prefix [16]byte // hex of 8 random bytes
}

func newUniqIDs() *uniqIDs {
	var r [8]byte
	_, _ = crand.Read(r[:])
	u := &uniqIDs{}
	hex.Encode(u.prefix[:], r[:])
	return u
}

// appendID appends the id numbered n to dst.
func (u *uniqIDs) appendID(dst []byte, n uint64) []byte {
	const digits = "0123456789abcdef"
	dst = append(dst, u.prefix[:]...)
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, digits[(n>>uint(shift))&0xF])
	}
	return dst
}

// nativeGCPercent is the garbage collector target of native runs unless
// GOGC is set. The live heap of the tool is a few MiB, so at the default
// of 100 it collects tens of times a second; that costs a third of the
// tool's CPU at high request rates, which the broker on the same machine
// would otherwise get.
const nativeGCPercent = 400

// lessGC sets the GC target for a native run and returns the function that
// restores the previous one.
func lessGC() func() {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(nativeGCPercent)
	return func() { debug.SetGCPercent(old) }
}
