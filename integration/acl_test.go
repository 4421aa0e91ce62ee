package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"rocketraft/acl"
	"rocketraft/admin"
)

// Accounts of the ACL tests: an application that may produce and consume everything but is
// not an admin, and an admin account that the brokers also sign with.
const (
	aclAppAK         = "appAccessKey01"
	aclAppSK         = "appSecretKey01-x9"
	aclAdminAK       = "adminAccessKey01"
	aclAdminSK       = "adminSecretKey01-q7"
	aclDeniedT       = "AclDeniedTopic"
	codeNoPerm       = 16
	codeUpdTop       = 17
	codeUpdConf      = 25
	codeRegBrk       = 103
	codeInvalidParam = 29
)

func writeACLFile(t testing.TB) string {
	p := filepath.Join(t.TempDir(), "plain_acl.yml")
	content := `globalWhiteRemoteAddresses:
accounts:
  - accessKey: ` + aclAppAK + `
    secretKey: ` + aclAppSK + `
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - ` + aclDeniedT + `=DENY
  - accessKey: ` + aclAdminAK + `
    secretKey: ` + aclAdminSK + `
    admin: true
`
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func aclBrokerOpts(file string) []brokerOpt {
	return []brokerOpt{
		withProp("aclEnable", "true"), withProp("aclConfigFile", file),
		withProp("accessKey", aclAdminAK), withProp("secretKey", aclAdminSK),
	}
}

// signedRaw sends one raw request signed with ak/sk ("" = unsigned).
func signedRaw(addr string, code int, ext map[string]string, body []byte, ak, sk string) (*remotingCmd, error) {
	if ak != "" {
		acl.Sign(ext, body, ak, sk)
	}
	return rawRequest(addr, code, ext, body, 10*time.Second)
}

// TestACLClassic: a name server and a classic broker with ACL on. The broker's registration
// (signed with its admin account) is accepted; the official Go client with the right
// credentials produces and consumes; a wrong secret, no credentials or a denied topic are
// refused with NO_PERMISSION; admin requests need an admin account; UPDATE_BROKER_CONFIG
// changes only allow-listed keys, even for the admin.
func TestACLClassic(t *testing.T) {
	file := writeACLFile(t)
	ns := startNamesrv(t, "--aclEnable=true", "--aclConfigFile="+file)
	c := &cluster{ns: ns, b: startBroker(t, ns, aclBrokerOpts(file)...)} // waits for its registration
	topic := uniq("AclTopic")
	creds := primitive.Credentials{AccessKey: aclAppAK, SecretKey: aclAppSK}

	p := newProducer(t, c, producer.WithCredentials(creds))
	want := sendSync(t, p, topic, "acl", 5, nil)
	pc := startPushConsumer(t, c, uniq("AclGroup"), topic, consumer.MessageSelector{}, consumer.WithCredentials(creds))
	eventually(t, 30*time.Second, "consumer with credentials gets every message", func() error {
		if d := diffBodies(bodies(want), pc.got.snapshot()); len(d.missing) > 0 {
			return fmt.Errorf("missing %v", d.missing)
		}
		return nil
	})

	refused := func(name string, opts ...producer.Option) {
		t.Helper()
		bad := newProducer(t, c, append(opts, producer.WithRetry(0))...)
		_, err := bad.SendSync(context.Background(), primitive.NewMessage(topic, []byte("nope")))
		if err == nil || !strings.Contains(err.Error(), "16") {
			t.Fatalf("%s: send not refused with NO_PERMISSION: %v", name, err)
		}
		t.Logf("%s refused: %v", name, err)
	}
	refused("wrong secret", producer.WithCredentials(primitive.Credentials{AccessKey: aclAppAK, SecretKey: "wrong-secret-123"}))
	refused("no credentials")
	deniedP := newProducer(t, c, producer.WithCredentials(creds), producer.WithRetry(0))
	if _, err := deniedP.SendSync(context.Background(), primitive.NewMessage(aclDeniedT, []byte("x"))); err == nil || !strings.Contains(err.Error(), "no PUB permission on topic") {
		t.Fatalf("send to a DENY topic: %v, want NO_PERMISSION", err)
	}

	// Admin requests.
	topicExt := func() map[string]string {
		return map[string]string{"topic": uniq("AdminTopic"), "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
	}
	expect := func(what string, resp *remotingCmd, err error, code int, remark string) {
		t.Helper()
		if err != nil || resp.Code != code || !strings.Contains(resp.Remark, remark) {
			if resp != nil {
				t.Fatalf("%s: got %d %q (%v), want %d containing %q", what, resp.Code, resp.Remark, err, code, remark)
			}
			t.Fatalf("%s: %v", what, err)
		}
	}
	resp, err := signedRaw(c.b.addr, codeUpdTop, topicExt(), nil, aclAppAK, aclAppSK)
	expect("createTopic by a non-admin", resp, err, codeNoPerm, "needs an admin account")
	resp, err = signedRaw(c.b.addr, codeUpdTop, topicExt(), nil, aclAdminAK, aclAdminSK)
	expect("createTopic by the admin", resp, err, respSuccess, "")
	resp, err = signedRaw(c.b.addr, codeUpdConf, map[string]string{}, []byte("brokerPermission=6\n"), aclAppAK, aclAppSK)
	expect("updateBrokerConfig by a non-admin", resp, err, codeNoPerm, "needs an admin account")
	resp, err = signedRaw(c.b.addr, codeUpdConf, map[string]string{}, []byte("aclEnable=false\nbrokerPermission=6\n"), aclAdminAK, aclAdminSK)
	expect("updateBrokerConfig of aclEnable by the admin", resp, err, codeNoPerm, "aclEnable cannot be changed")
	resp, err = signedRaw(c.b.addr, codeUpdConf, map[string]string{}, []byte("logLevel=debug\nbrokerPermission=6\n"), aclAdminAK, aclAdminSK)
	expect("updateBrokerConfig of allow-listed keys by the admin", resp, err, respSuccess, "")

	// mqadmin signs with the account in $ROCKETMQ_ACCESS_KEY/$ROCKETMQ_SECRET_KEY.
	var errOut strings.Builder
	t.Setenv(admin.EnvAccessKey, aclAppAK)
	t.Setenv(admin.EnvSecretKey, aclAppSK)
	if _, code := runAdminCode(c, &errOut, "updateTopic", "-b", c.b.addr, "-t", uniq("AdminCli")); code == 0 || !strings.Contains(errOut.String(), "admin") {
		t.Fatalf("mqadmin updateTopic as a non-admin: exit %d, %s", code, errOut.String())
	}
	t.Setenv(admin.EnvAccessKey, aclAdminAK)
	t.Setenv(admin.EnvSecretKey, aclAdminSK)
	errOut.Reset()
	if _, code := runAdminCode(c, &errOut, "updateTopic", "-b", c.b.addr, "-t", uniq("AdminCli")); code != 0 {
		t.Fatalf("mqadmin updateTopic as the admin: exit %d, %s", code, errOut.String())
	}

	// Name server: a registration not signed by an admin is refused.
	reg := map[string]string{"brokerName": "rogue", "brokerAddr": "127.0.0.1:1", "clusterName": "DefaultCluster", "haServerAddr": "127.0.0.1:2", "brokerId": "0"}
	resp, err = signedRaw(ns.addr, codeRegBrk, reg, []byte(`{}`), "", "")
	expect("unsigned REGISTER_BROKER", resp, err, codeNoPerm, "no AccessKey")
	reg = map[string]string{"brokerName": "rogue", "brokerAddr": "127.0.0.1:1", "clusterName": "DefaultCluster", "haServerAddr": "127.0.0.1:2", "brokerId": "0"}
	resp, err = signedRaw(ns.addr, codeRegBrk, reg, []byte(`{}`), aclAppAK, aclAppSK)
	expect("REGISTER_BROKER by a non-admin", resp, err, codeNoPerm, "needs an admin account")
}

// TestUpdateBrokerConfigAllowListWithoutACL: the allow-list holds with ACL off too.
func TestUpdateBrokerConfigAllowListWithoutACL(t *testing.T) {
	c := startCluster(t)
	resp, err := rawRequest(c.b.addr, codeUpdConf, map[string]string{}, []byte("storePathRootDir=/tmp/elsewhere\n"), 5*time.Second)
	if err != nil || resp.Code != codeNoPerm {
		t.Fatalf("storePathRootDir change: %v %+v", err, resp)
	}
	resp, err = rawRequest(c.b.addr, codeUpdConf, map[string]string{}, []byte("brokerPermission=banana\n"), 5*time.Second)
	if err != nil || resp.Code != codeInvalidParam {
		t.Fatalf("bad brokerPermission value: %v %+v", err, resp)
	}
	// Drain: with brokerPermission 4 (read only) sends are refused, 6 brings them back.
	topic := uniq("DrainTopic")
	if r, err := sendRaw(c.b.addr, topic, 0, []byte("a"), ""); err != nil || r.Code != respSuccess {
		t.Fatalf("send before drain: %v %+v", err, r)
	}
	if r, err := rawRequest(c.b.addr, codeUpdConf, nil, []byte("brokerPermission=4"), 5*time.Second); err != nil || r.Code != respSuccess {
		t.Fatalf("drain: %v %+v", err, r)
	}
	if r, err := sendRaw(c.b.addr, topic, 0, []byte("b"), ""); err != nil || r.Code != codeNoPerm {
		t.Fatalf("send while drained: %v %+v", err, r)
	}
	if r, err := rawRequest(c.b.addr, codeUpdConf, nil, []byte("brokerPermission=6"), 5*time.Second); err != nil || r.Code != respSuccess {
		t.Fatalf("undrain: %v %+v", err, r)
	}
	if r, err := sendRaw(c.b.addr, topic, 0, []byte("c"), ""); err != nil || r.Code != respSuccess {
		t.Fatalf("send after undrain: %v %+v", err, r)
	}
}

// TestACLDLedgerForward: with ACL on in a three-node group, a send to a follower is checked
// there and forwarded to the leader signed with the broker's account: valid credentials
// succeed, a wrong secret is refused, and a client cannot smuggle the forwarding fields in.
func TestACLDLedgerForward(t *testing.T) {
	file := writeACLFile(t)
	ns := startNamesrv(t, "--aclEnable=true", "--aclConfigFile="+file)
	g := startRaftGroup(t, ns, 3, aclBrokerOpts(file)...)
	master := g.waitMaster(t, 30*time.Second, nil)
	var follower *broker
	for _, b := range g.nodes {
		if b != master {
			follower = b
			break
		}
	}
	topic := uniq("AclFwd")
	send := func(addr, ak, sk string, extra map[string]string) (*remotingCmd, error) {
		ext := map[string]string{
			"producerGroup": "ACL_FWD_PRODUCER", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": "0", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0", "properties": "",
			"reconsumeTimes": "0", "unitMode": "false", "batch": "false",
		}
		for k, v := range extra {
			ext[k] = v
		}
		return signedRaw(addr, codeSendMessage, ext, []byte("forwarded body"), ak, sk)
	}
	eventually(t, 20*time.Second, "signed send through a follower", func() error {
		r, err := send(follower.addr, aclAppAK, aclAppSK, nil)
		if err != nil {
			return err
		}
		if r.Code != respSuccess {
			return fmt.Errorf("code %d %q", r.Code, r.Remark)
		}
		return nil
	})
	r, err := send(follower.addr, aclAppAK, "wrong-secret-123", nil)
	if err != nil || r.Code != codeNoPerm {
		t.Fatalf("wrong secret through a follower: %v %+v", err, r)
	}
	r, err = send(follower.addr, "", "", nil)
	if err != nil || r.Code != codeNoPerm {
		t.Fatalf("unsigned send through a follower: %v %+v", err, r)
	}
	r, err = send(master.addr, aclAppAK, aclAppSK, map[string]string{"__rrForwarded": "n9", "__rrBornHost": "10.9.9.9:1"})
	if err != nil || r.Code != codeNoPerm || !strings.Contains(r.Remark, "reserved for brokers") {
		t.Fatalf("client-made forwarding fields: %v %+v", err, r)
	}
}

// TestACLRefusesPlaceholderFile: the shipped example file has placeholder keys, and a broker
// (or name server) told to use it does not start.
func TestACLRefusesPlaceholderFile(t *testing.T) {
	needBinaries(t)
	example, err := filepath.Abs(filepath.Join("..", "config", "plain_acl.example.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ bin string }{{"mqbroker"}, {"mqnamesrv"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		args := []string{"--aclEnable=true", "--aclConfigFile=" + example}
		if c.bin == "mqbroker" {
			args = append(args, "--storePathRootDir="+t.TempDir(), "--listenPort=0", "--namesrvAddr=127.0.0.1:1")
		} else {
			args = append(args, "--listen=127.0.0.1:0")
		}
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, c.bin), args...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "placeholder") {
			t.Fatalf("%s with the example ACL file: %v\n%s", c.bin, err, out)
		}
	}
}
