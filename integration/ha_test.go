package integration

// Classic master/slave replication (package ha) with real processes: an ASYNC_MASTER and its
// SLAVE, SYNC_MASTER's answers with the slave stopped, frozen and back, a hostile HA peer, and a
// legacy slave following a three-node DLedger group across leader kills.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"rocketraft/protocol"
)

const codeGetBrokerHAStatus = 907

// haProps are the keys a test HA pair shares: small commitlog files so replication crosses
// several of them, and quick heartbeats.
func haProps(fileSize int) []brokerOpt {
	return []brokerOpt{
		withProp("mappedFileSizeCommitLog", strconv.Itoa(fileSize)),
		withProp("maxMessageSize", strconv.Itoa(8<<10)),
		withProp("haSendHeartbeatInterval", "1000"),
		withProp("haHousekeepingInterval", "5000"),
	}
}

// startSlave starts a classic SLAVE of the group brokerName with brokerId id.
func startSlave(t testing.TB, ns *namesrv, brokerName string, id int, opts ...brokerOpt) *broker {
	t.Helper()
	all := append([]brokerOpt{withProp("brokerName", brokerName), withProp("brokerRole", "SLAVE"),
		withProp("brokerId", strconv.Itoa(id))}, opts...)
	return startBroker(t, ns, all...)
}

var runtimeKeyRE = regexp.MustCompile(`"([A-Za-z]+)"\s*:\s*"([^"]*)"`)

// runtimeInfo returns a broker's GET_BROKER_RUNTIME_INFO table.
func runtimeInfo(addr string) (map[string]string, error) {
	resp, err := rawRequest(addr, codeGetBrokerRuntimeInfo, nil, nil, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if resp.Code != respSuccess {
		return nil, fmt.Errorf("runtime info: code %d %q", resp.Code, resp.Remark)
	}
	out := map[string]string{}
	for _, m := range runtimeKeyRE.FindAllSubmatch(resp.Body, -1) {
		out[string(m[1])] = string(m[2])
	}
	return out, nil
}

// clMax is a broker's commitlog max offset from its runtime info.
func clMax(addr string) (int64, error) {
	info, err := runtimeInfo(addr)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(info["commitLogMaxOffset"], 10, 64)
}

// waitCaughtUp waits until slave's commitlog max offset equals master's (which must not move).
func waitCaughtUp(t testing.TB, master, slave string, timeout time.Duration) int64 {
	t.Helper()
	var m int64
	eventually(t, timeout, "slave "+slave+" catches up with "+master, func() error {
		var err error
		if m, err = clMax(master); err != nil {
			return err
		}
		s, err := clMax(slave)
		if err != nil {
			return err
		}
		if s != m {
			return fmt.Errorf("slave at %d, master at %d", s, m)
		}
		return nil
	})
	return m
}

// haStatus asks a broker for GET_BROKER_HA_STATUS.
func haStatus(addr string) (*protocol.HARuntimeInfo, error) {
	resp, err := rawRequest(addr, codeGetBrokerHAStatus, nil, nil, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if resp.Code != respSuccess {
		return nil, fmt.Errorf("HA status: code %d %q", resp.Code, resp.Remark)
	}
	var info protocol.HARuntimeInfo
	if err := protocol.Decode(resp.Body, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// compareCommitLogDirs checks that two commitlog directories hold the same files with the same
// bytes up to end (the data's end; beyond it both are unwritten).
func compareCommitLogDirs(t testing.TB, a, b string, end int64) {
	t.Helper()
	fa, err := readSegments(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := readSegments(b)
	if err != nil {
		t.Fatal(err)
	}
	var compared int64
	for i := 0; i < len(fa) && fa[i].start < end; i++ {
		if i >= len(fb) || fb[i].start != fa[i].start {
			t.Fatalf("commitlog file %020d of %s is missing from %s", fa[i].start, a, b)
		}
		n := min(int64(len(fa[i].data)), end-fa[i].start)
		if int64(len(fb[i].data)) < n {
			t.Fatalf("commitlog file %020d: %d bytes in %s, need %d", fa[i].start, len(fb[i].data), b, n)
		}
		if !bytes.Equal(fa[i].data[:n], fb[i].data[:n]) {
			at := 0
			for fa[i].data[at] == fb[i].data[at] {
				at++
			}
			t.Fatalf("commitlogs differ in file %020d at byte %d (%s vs %s)", fa[i].start, at, a, b)
		}
		compared += n
	}
	if compared != end {
		t.Fatalf("compared %d bytes of %d", compared, end)
	}
}

// signal sends sig to a running broker process by PID.
func (b *broker) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	b.proc.mu.Lock()
	cmd := b.proc.cmd
	b.proc.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		t.Fatalf("%s is not running", b.proc.name)
	}
	if err := syscall.Kill(cmd.Process.Pid, sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, b.proc.name, err)
	}
}

// TestHAAsyncMasterSlave: an ASYNC_MASTER and a SLAVE (brokerId 1, learning the master from the
// name server): every message sent to the master reaches the slave, which serves pulls, refuses
// sends with SERVICE_NOT_AVAILABLE, copies topics and consumer offsets, reports its master in
// runtime info, GET_BROKER_HA_STATUS and mqadmin haStatus; a hostile HA peer is disconnected
// without disturbing the slave; after a clean stop both commitlogs are byte-identical.
func TestHAAsyncMasterSlave(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	master := startBroker(t, ns, haProps(64<<10)...)
	slave := startSlave(t, ns, master.name, 1, haProps(64<<10)...)
	c := &cluster{ns: ns, b: master}
	topic, group := uniq("HATopic"), uniq("GHA")

	p := newProducer(t, c)
	acked := sendSync(t, p, topic, "ha-"+strings.Repeat("x", 600), 400, nil)
	end := waitCaughtUp(t, master.addr, slave.addr, 30*time.Second)
	if end < 3*(64<<10) {
		t.Fatalf("the test data spans only %d bytes: not several commitlog files", end)
	}

	// A hostile peer on the master's HA port: its connection is closed, nothing else changes.
	for _, bad := range [][]byte{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, []byte("GET / HTTP/1.0\r\n\r\n")} {
		conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(master.port+1))
		if err != nil {
			t.Fatalf("dial the master's HA port: %v", err)
		}
		_, _ = conn.Write(bad)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, conn)
		conn.Close()
		if err != nil && !errors.Is(err, syscall.ECONNRESET) { // a reset is a close with unread bytes
			t.Fatalf("hostile HA peer (%q) was not disconnected: %v", bad, err)
		}
	}

	// The slave serves pulls of everything acknowledged, at the acknowledged queue offsets.
	queues := 0
	for _, s := range acked {
		queues = max(queues, s.queue+1)
	}
	eventually(t, 20*time.Second, "slave knows the topic", func() error {
		_, _, err := rawPull(slave.addr, group, topic, 0, 0, "*")
		return err
	})
	checkAcked(t, "slave", readQueues(t, slave.addr, topic, queues), acked)
	if more := sendSync(t, p, topic, "after-hostile", 20, nil); len(more) != 20 {
		t.Fatal("sends after the hostile peer failed")
	}
	end = waitCaughtUp(t, master.addr, slave.addr, 20*time.Second)

	// Sends to the slave are refused with a code producers retry elsewhere.
	resp, err := sendRaw(slave.addr, topic, 0, []byte("to-slave"), "")
	if err != nil || resp.Code != 14 {
		t.Fatalf("send to the slave: %v %+v, want SERVICE_NOT_AVAILABLE (14)", err, resp)
	}

	// Metadata follows the master: a consumer offset committed on the master appears on the slave.
	if r, err := rawRequest(master.addr, 15, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": "7"}, nil, 5*time.Second); err != nil || r.Code != respSuccess {
		t.Fatalf("commit offset on the master: %v %+v", err, r)
	}
	eventually(t, 30*time.Second, "consumer offset copied to the slave", func() error {
		r, err := rawRequest(slave.addr, 14, map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0"}, nil, 5*time.Second)
		if err != nil {
			return err
		}
		if r.ExtFields["offset"] != "7" {
			return fmt.Errorf("slave answers offset %q (code %d)", r.ExtFields["offset"], r.Code)
		}
		return nil
	})

	// Visibility.
	info, err := runtimeInfo(slave.addr)
	if err != nil || info["masterAddr"] != master.addr || info["haConnected"] != "true" || info["brokerRole"] != "SLAVE" {
		t.Fatalf("slave runtime info: %v %v", err, info)
	}
	minfo, err := runtimeInfo(master.addr)
	if err != nil || minfo["haConnections"] != "1" || minfo["haInSyncSlaves"] != "1" {
		t.Fatalf("master runtime info: %v %v", err, minfo)
	}
	ms, err := haStatus(master.addr)
	if err != nil || !ms.Master || len(ms.HAConnectionInfo) != 1 || ms.HAConnectionInfo[0].SlaveAckOffset != end || ms.HAConnectionInfo[0].Diff != 0 {
		t.Fatalf("master HA status: %v %+v", err, ms)
	}
	ss, err := haStatus(slave.addr)
	if err != nil || ss.Master || ss.HAClientRuntimeInfo.MasterAddr != "127.0.0.1:"+strconv.Itoa(master.port+1) || ss.HAClientRuntimeInfo.MaxOffset != end {
		t.Fatalf("slave HA status: %v %+v", err, ss)
	}
	out := runAdmin(t, c, "haStatus", "-b", master.name)
	t.Logf("mqadmin haStatus:\n%s", out)
	if !strings.Contains(out, "MASTER") || !strings.Contains(out, "SLAVE") || !strings.Contains(out, "FOLLOWING") || !strings.Contains(out, "IN_SYNC") {
		t.Fatalf("mqadmin haStatus output:\n%s", out)
	}

	if err := slave.stop(); err != nil {
		t.Fatal(err)
	}
	if err := master.stop(); err != nil {
		t.Fatal(err)
	}
	compareCommitLogDirs(t, filepath.Join(master.storeRoot, "commitlog"), filepath.Join(slave.storeRoot, "commitlog"), end)
}

// sendStatus sends one message with the official client and returns its status.
func sendStatus(t testing.TB, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic, body string) primitive.SendStatus {
	t.Helper()
	r, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
	if err != nil {
		t.Fatalf("send %s: %v", body, err)
	}
	return r.Status
}

// TestHASyncMaster: a SYNC_MASTER answers SLAVE_NOT_AVAILABLE while no slave is connected,
// SEND_OK once its slave stores the message, FLUSH_SLAVE_TIMEOUT after syncFlushTimeout while the
// slave is frozen (SIGSTOP), SEND_OK again after SIGCONT, SLAVE_NOT_AVAILABLE once it is stopped
// and SEND_OK after its restart; the official client reports the matching send statuses.
func TestHASyncMaster(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	opts := append(haProps(1<<20), withProp("brokerRole", "SYNC_MASTER"), withProp("syncFlushTimeout", "1500"))
	master := startBroker(t, ns, opts...)
	c := &cluster{ns: ns, b: master}
	topic := uniq("SyncMaster")
	p := newProducer(t, c)

	if st := sendStatus(t, p, topic, "no-slave"); st != primitive.SendSlaveNotAvailable {
		t.Fatalf("no slave: status %d, want SendSlaveNotAvailable", st)
	}
	resp, err := sendRaw(master.addr, topic, 0, []byte("no-slave-raw"), "")
	if err != nil || resp.Code != 11 || resp.ExtFields["msgId"] == "" {
		t.Fatalf("raw send without slave: %v %+v, want SLAVE_NOT_AVAILABLE (11) with a msgId", err, resp)
	}

	slave := startSlave(t, ns, master.name, 1, haProps(1<<20)...)
	eventually(t, 20*time.Second, "SEND_OK with the slave connected", func() error {
		r, err := sendRaw(master.addr, topic, 0, []byte("with-slave"), "")
		if err != nil {
			return err
		}
		if r.Code != respSuccess {
			return fmt.Errorf("code %d %q", r.Code, r.Remark)
		}
		return nil
	})
	if st := sendStatus(t, p, topic, "with-slave-client"); st != primitive.SendOK {
		t.Fatalf("slave connected: status %d, want SendOK", st)
	}

	// Frozen slave: the connection stays up, the ack never comes.
	slave.signal(t, syscall.SIGSTOP)
	start := time.Now()
	if st := sendStatus(t, p, topic, "frozen-slave"); st != primitive.SendFlushSlaveTimeout {
		slave.signal(t, syscall.SIGCONT)
		t.Fatalf("frozen slave: status %d, want SendFlushSlaveTimeout", st)
	}
	if d := time.Since(start); d < 1400*time.Millisecond {
		t.Fatalf("FLUSH_SLAVE_TIMEOUT after %v, before syncFlushTimeout", d)
	}
	slave.signal(t, syscall.SIGCONT)
	eventually(t, 20*time.Second, "SEND_OK after the slave resumes", func() error {
		r, err := sendRaw(master.addr, topic, 0, []byte("resumed"), "")
		if err != nil {
			return err
		}
		if r.Code != respSuccess {
			return fmt.Errorf("code %d %q", r.Code, r.Remark)
		}
		return nil
	})

	// Stopped slave: answered at once.
	if err := slave.stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "SLAVE_NOT_AVAILABLE with the slave stopped", func() error {
		r, err := sendRaw(master.addr, topic, 0, []byte("stopped"), "")
		if err != nil {
			return err
		}
		if r.Code != 11 {
			return fmt.Errorf("code %d %q", r.Code, r.Remark)
		}
		return nil
	})
	slave.restart()
	eventually(t, 20*time.Second, "SEND_OK after the slave restarts", func() error {
		r, err := sendRaw(master.addr, topic, 0, []byte("restarted"), "")
		if err != nil {
			return err
		}
		if r.Code != respSuccess {
			return fmt.Errorf("code %d %q", r.Code, r.Remark)
		}
		return nil
	})
	if st := sendStatus(t, p, topic, "restarted-client"); st != primitive.SendOK {
		t.Fatalf("slave back: status %d, want SendOK", st)
	}
	waitCaughtUp(t, master.addr, slave.addr, 20*time.Second)
}

// TestHALegacySlaveRaftGroup: a classic SLAVE (brokerId 10) registered under a DLedger group's
// brokerName follows the group's leader over HA while producers send continuously and the leader
// is killed twice; it reconnects to each new leader and continues from its own offset. In the
// end its commitlog is byte-identical to the group's, and raw pulls from it return every
// acknowledged message at its acknowledged queue offset.
func TestHALegacySlaveRaftGroup(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := startRaftGroup(t, ns, 3, withProp("haSendHeartbeatInterval", "1000"), withProp("haHousekeepingInterval", "5000"))
	leader := g.waitMaster(t, 20*time.Second, nil)
	slave := startSlave(t, ns, g.name, 10, withProp("mappedFileSizeCommitLog", strconv.Itoa(16<<10)),
		withProp("maxMessageSize", strconv.Itoa(8<<10)), withProp("haSendHeartbeatInterval", "1000"), withProp("haHousekeepingInterval", "5000"))
	topic := uniq("LegacySlave")
	l := startChaosLoad(t, ns.addr, topic, 2, true)
	l.waitAcked(50, 30*time.Second, "first sends")
	waitCaughtUp(t, leader.addr, slave.addr, 30*time.Second)
	for kill := 1; kill <= 2; kill++ {
		leader.kill()
		t.Logf("kill %d: leader %s killed", kill, leader.proc.name)
		next := g.waitMaster(t, 20*time.Second, leader)
		l.waitAcked(50, 40*time.Second, fmt.Sprintf("sends after kill %d", kill))
		eventually(t, 30*time.Second, "legacy slave follows the new leader", func() error {
			st, err := haStatus(slave.addr)
			if err != nil {
				return err
			}
			if want := "127.0.0.1:" + strconv.Itoa(next.port+1); st.HAClientRuntimeInfo.MasterAddr != want || !st.HAClientRuntimeInfo.IsActivated {
				return fmt.Errorf("slave follows %q (connected %v), want %s", st.HAClientRuntimeInfo.MasterAddr, st.HAClientRuntimeInfo.IsActivated, want)
			}
			return nil
		})
		leader.restart()
		leader = next
	}
	l.stopAndWait()
	_, acked := l.snapshot()
	leader = g.waitMaster(t, 20*time.Second, nil)
	end := waitCaughtUp(t, leader.addr, slave.addr, 60*time.Second)
	queues := 0
	for _, s := range acked {
		queues = max(queues, s.queue+1)
	}
	checkAcked(t, "legacy slave", readQueues(t, slave.addr, topic, queues), acked)
	for _, b := range g.nodes {
		if n, err := clMax(b.addr); err != nil || n != end {
			eventually(t, 30*time.Second, "every member at the leader's end", func() error {
				n, err := clMax(b.addr)
				if err != nil || n != end {
					return fmt.Errorf("%s at %d (%v), leader at %d", b.proc.name, n, err, end)
				}
				return nil
			})
		}
	}
	out := runAdmin(t, &cluster{ns: ns, b: leader}, "haStatus", "-b", g.name)
	t.Logf("mqadmin haStatus:\n%s", out)
	if !strings.Contains(out, "MASTER") || !strings.Contains(out, "FOLLOWING") || !strings.Contains(out, "IN_SYNC") {
		t.Fatalf("mqadmin haStatus output:\n%s", out)
	}
	// The slave's log shows it followed three leaders.
	logs, _ := os.ReadFile(slave.proc.logPath)
	if n := strings.Count(string(logs), "HA connected to master"); n < 3 {
		t.Fatalf("the slave connected to a master %d times, want >= 3 (one per leader)", n)
	}
	if err := slave.stop(); err != nil {
		t.Fatal(err)
	}
	for _, b := range slices.Backward(g.nodes) {
		if err := b.stop(); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range g.nodes {
		compareCommitLogDirs(t, commitLogDir(b), filepath.Join(slave.storeRoot, "commitlog"), end)
	}
	t.Logf("legacy slave: %d messages acknowledged across 2 leader kills, %d commitlog bytes identical on the slave and all 3 members", len(acked), end)
}

// TestHASlaveRead: with slaveReadEnable and accessMessageInMemoryMaxRatio=0 on the master, a
// reader behind the commitlog end is told to read from brokerId 1, the classic slave; the
// official push consumer follows the suggestion, the slave serves its pulls (sending a caught-up
// reader back to 0), and every message is received.
func TestHASlaveRead(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	read := []brokerOpt{withProp("slaveReadEnable", "true"), withProp("accessMessageInMemoryMaxRatio", "0")}
	master := startBroker(t, ns, append(haProps(1<<20), read...)...)
	slave := startSlave(t, ns, master.name, 1, append(haProps(1<<20), read...)...)
	c := &cluster{ns: ns, b: master}
	topic, group := uniq("HASlaveRead"), uniq("GHASlaveRead")
	acked := sendSync(t, newProducer(t, c), topic, "sr", 200, nil)
	waitCaughtUp(t, master.addr, slave.addr, 30*time.Second)
	if got := pullSuggestion(t, master.addr, group, topic, 0); got != 1 {
		t.Fatalf("pull from offset 0 on the master suggests broker %d, want 1", got)
	}
	before := msgGetTotal(t, slave)
	pc := startPushConsumer(t, c, group, topic, all)
	eventually(t, 60*time.Second, "the consumer receives every message", func() error {
		return countErr("consumer", pc.got.count(), len(acked))
	})
	pc.shutdown()
	if d := diffBodies(bodies(acked), pc.got.snapshot()); len(d.missing) > 0 {
		t.Fatalf("consumer: %s", d)
	}
	if served := msgGetTotal(t, slave) - before; served == 0 {
		t.Fatal("the slave served no message although the master suggested reading from broker 1")
	} else {
		t.Logf("slave read: %d messages consumed, %d pulled from the classic slave", pc.got.count(), served)
	}
}
