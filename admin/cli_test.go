package admin

import (
	"strings"
	"testing"
	"time"

	"rocketraft/protocol"
	"rocketraft/remoting"
)

func TestHelpAndUsageErrors(t *testing.T) {
	out, _, code := runMain("help")
	if code != 0 || !strings.HasPrefix(out, "Usage: mqadmin <command> [options]\n") {
		t.Fatalf("help: exit %d\n%s", code, out)
	}
	for _, c := range commands {
		if !strings.Contains(out, "\n  "+c.name+" ") {
			t.Fatalf("help does not list %s", c.name)
		}
		for _, args := range [][]string{{c.name, "-h"}, {"help", c.name}} {
			cout, _, code := runMain(args...)
			if code != 0 || !strings.HasPrefix(cout, "Usage: mqadmin "+c.name+" ") || !strings.Contains(cout, "--namesrvAddr") {
				t.Fatalf("%v: exit %d\n%s", args, code, cout)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Usage: mqadmin"},
		{[]string{"frobnicate"}, `mqadmin: unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, `mqadmin: unknown command "frobnicate"`},
		{[]string{"topicList", "--bogus"}, "mqadmin topicList: unknown flag: --bogus"},
		{[]string{"topicList", "extra"}, `mqadmin topicList: unexpected arguments ["extra"]`},
		{[]string{"topicList", "-o", "xml"}, "-o must be table or json"},
		{[]string{"topicStatus", "-n", "127.0.0.1:1"}, "mqadmin topicStatus: -t/--topic is required"},
	} {
		_, errOut, code := runMain(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("%v: exit %d, stderr %q, want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestNoNameServer(t *testing.T) {
	t.Setenv("NAMESRV_ADDR", "")
	_, errOut, code := runMain("topicList")
	if code != 1 || !strings.Contains(errOut, "no name server address") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestNamesrvFromEnvAndFailover(t *testing.T) {
	f := newFixture(t, nil, nil, nil)
	f.route("T1", 1, "broker-a")
	dead := deadAddr(t)
	t.Setenv("NAMESRV_ADDR", dead+";"+f.ns.addr())
	out, errOut, code := runMain("topicList")
	if code != 0 || out != "T1\n" {
		t.Fatalf("exit %d, out %q, stderr %q", code, out, errOut)
	}
	// -n wins over the environment.
	_, errOut, code = runMain("topicList", "-n", dead)
	if code != 1 || !strings.Contains(errOut, "no name server answered: call "+dead) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestErrorAnswerIsNotRetried: a name server that answers with an error code is an answer.
func TestErrorAnswerIsNotRetried(t *testing.T) {
	f := newFixture(t, nil, nil, nil)
	f.route("T1", 1, "broker-a")
	refusing := startPeer(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetRouteInfoByTopic: func(req *remoting.Command) *remoting.Command {
			return req.NewResponse(remoting.SystemError, "name server not ready")
		},
	})
	_, errOut, code := runMain("topicRoute", "-t", "T1", "-n", refusing.addr()+";"+f.ns.addr())
	if code != 1 || !strings.Contains(errOut, refusing.addr()+" answered code 1: name server not ready") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if len(f.ns.requests(remoting.GetRouteInfoByTopic)) != 0 {
		t.Fatal("second name server asked after an answer")
	}
}

func TestTimeoutBoundsEachCall(t *testing.T) {
	silent := startPeer(t, map[int32]func(*remoting.Command) *remoting.Command{
		remoting.GetBrokerRuntimeInfo: func(*remoting.Command) *remoting.Command { return nil }, // never answers
	})
	start := time.Now()
	_, errOut, code := runMain("brokerStatus", "-b", silent.addr(), "--timeout", "200ms")
	if code != 1 || !strings.Contains(errOut, "deadline exceeded") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
}

func TestClusterBrokersOrder(t *testing.T) {
	ci := &protocol.ClusterInfo{
		BrokerAddrTable: map[string]*protocol.BrokerData{
			"b": {BrokerName: "b", BrokerAddrs: map[int64]string{2: "h:3", 0: "h:1", 1: "h:2"}},
			"a": {BrokerName: "a", BrokerAddrs: map[int64]string{1: "g:2"}},
			"z": {BrokerName: "z", BrokerAddrs: map[int64]string{0: "z:1"}},
		},
		ClusterAddrTable: map[string][]string{"C2": {"z"}, "C1": {"b", "a", "missing"}},
	}
	all, err := ClusterBrokers(ci, "", false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range all {
		got = append(got, b.Cluster+"/"+b.BrokerName+"/"+b.Addr)
	}
	if want := "C1/a/g:2 C1/b/h:1 C1/b/h:2 C1/b/h:3 C2/z/z:1"; strings.Join(got, " ") != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	masters, _ := ClusterBrokers(ci, "C1", true)
	if len(masters) != 1 || masters[0].Addr != "h:1" {
		t.Fatalf("masters %v", masters)
	}
}
