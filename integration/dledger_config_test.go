package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rocketmqDLegerConf is Apache RocketMQ's conf/dledger/broker-n<i>.conf as shipped (spaces
// around '=', storePathCommitLog, a thread-pool key this broker does not know), with only the
// ports, paths and name server filled in for the test.
const rocketmqDLegerConf = `brokerClusterName = RaftCluster
brokerName=RaftNode00
listenPort=%d
namesrvAddr=%s
storePathRootDir=%s
storePathCommitLog=%s/commitlog
enableDLegerCommitLog=true
dLegerGroup=RaftNode00
dLegerPeers=%s
## must be unique
dLegerSelfId=n%d
sendMessageThreadPoolNums=16
`

// TestRocketMQDLegerConfigStartsUnchanged: three brokers started with nothing but -c and
// RocketMQ's own DLedger example files elect a master, register it as brokerId 0 and acknowledge
// a send, and the node logs the unknown key as a warning only.
func TestRocketMQDLegerConfigStartsUnchanged(t *testing.T) {
	t.Parallel()
	ns := startNamesrv(t)
	g := &raftGroup{ns: ns, name: "RaftNode00"}
	peers := make([]string, 3)
	for i := range peers {
		peers[i] = fmt.Sprintf("n%d-127.0.0.1:%d", i, freePort(t))
	}
	for i := range 3 {
		dir := t.TempDir()
		b := &broker{t: t, name: g.name, storeRoot: filepath.Join(dir, "rmqstore"), nsAddr: ns.addr,
			props: map[string]string{"dLegerSelfId": fmt.Sprintf("n%d", i)}, flags: map[string]string{},
			configPath: filepath.Join(dir, fmt.Sprintf("broker-n%d.conf", i))}
		b.port = freePort(t, -2, 1)
		b.addr = "127.0.0.1:" + strconv.Itoa(b.port)
		conf := fmt.Sprintf(rocketmqDLegerConf, b.port, ns.addr, b.storeRoot, b.storeRoot, strings.Join(peers, ";"), i)
		if err := os.WriteFile(b.configPath, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		b.proc = &proc{name: fmt.Sprintf("mqbroker RaftNode00/n%d", i), bin: filepath.Join(binDir, "mqbroker"),
			args: []string{"-c", b.configPath}, env: []string{"HOME=" + dir}, logPath: filepath.Join(dir, "mqbroker.log")}
		b.start(t)
		register(t, b.proc)
		g.nodes = append(g.nodes, b)
	}
	for _, b := range g.nodes {
		if err := b.waitReady(30 * time.Second); err != nil {
			t.Fatalf("%s did not become ready: %v", b.proc.name, err)
		}
	}
	leader := g.waitMaster(t, 20*time.Second, nil)
	checkRoles(t, g, leader)
	s := sendRawOK(t, g.followers(leader)[0].addr, uniq("RmqConf"), "stock-config")
	t.Logf("RocketMQ's DLedger example files: master %s, a send through a follower acknowledged at offset %d", leader.proc.name, s.offset)
	logData, _ := os.ReadFile(leader.logPath)
	if !strings.Contains(string(logData), "sendMessageThreadPoolNums") {
		t.Errorf("the unknown key sendMessageThreadPoolNums was not warned about in the log")
	}
}
