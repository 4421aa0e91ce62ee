package deploy

import (
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"rocketraft/broker"
	"rocketraft/config"
	"rocketraft/proxy"
)

// composeFile is the compose stack, relative to the repository.
const composeFile = "deploy/compose.yaml"

// composeStack is the compose file's services with their configurations as the binaries would
// load them.
type composeStack struct {
	doc      map[string]any
	namesrv  *config.Namesrv
	brokers  map[string]*config.Broker // by service name
	proxy    proxy.Config
	services map[string]any
}

// loadCompose parses the compose file and loads every service's command line through its
// binary's configuration loader (files it mounts read from the repository).
func loadCompose(t *testing.T) composeStack {
	t.Helper()
	docs := yamlDocs(t, composeFile)
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents", composeFile, len(docs))
	}
	s := composeStack{doc: docs[0], brokers: map[string]*config.Broker{}}
	s.services, _ = get(s.doc, "services").(map[string]any)
	for name, svc := range s.services {
		cmd := strs(svc, "command")
		if len(cmd) == 0 {
			t.Fatalf("service %s has no command", name)
		}
		where := composeFile + " " + name
		switch cmd[0] {
		case "mqnamesrv":
			if s.namesrv != nil {
				t.Fatalf("two name servers; the test knows one")
			}
			s.namesrv = loadNamesrv(t, where, cmd[1:])
		case "mqbroker":
			s.brokers[name] = loadBroker(t, where, cmd[1:], composeMounts(t, svc))
		case "mqproxy":
			s.proxy = loadProxy(t, where, cmd[1:])
		default:
			t.Fatalf("service %s runs %q", name, cmd[0])
		}
	}
	if s.namesrv == nil || len(s.brokers) == 0 || s.proxy.NamesrvAddr == "" {
		t.Fatalf("%s: want a name server, brokers and a proxy", composeFile)
	}
	return s
}

// composeMounts maps the container paths of a service's file bind mounts to repository files.
func composeMounts(t *testing.T, svc any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range strs(svc, "volumes") {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
			continue // a named volume
		}
		out[parts[1]] = "deploy/" + strings.TrimPrefix(parts[0], "./")
	}
	return out
}

// composePorts is every port the compose stack's processes listen on, sorted: what the image
// should EXPOSE.
func composePorts(t *testing.T) []int {
	t.Helper()
	s := loadCompose(t)
	set := map[int]bool{port(t, s.namesrv.ListenAddr): true, s.namesrv.HTTPPort: true,
		s.proxy.GrpcServerPort: true, s.proxy.RemotingListenPort: true, s.proxy.MetricsPromExporterPort: true}
	for _, b := range s.brokers {
		self, err := b.SelfPeer()
		if err != nil {
			t.Fatal(err)
		}
		set[b.ListenPort], set[b.HAListenPort], set[port(t, self.Addr)], set[b.HTTPPort] = true, true, true, true
	}
	var out []int
	for p := range set {
		out = append(out, p)
	}
	sort.Ints(out)
	return out
}

// TestCompose checks the compose stack against the configurations its commands load: one image
// for all, a group whose dLegerPeers are exactly its services (each node's own id, on a name
// that resolves to it), brokerIP1 the service's fixed IPv4 address in the network's subnet, the
// name server address brokers and proxy use, HTTP ports bound beyond loopback, and healthchecks
// that read /status/ready (broker.ReadyPath) or /metrics on the ports actually configured.
func TestCompose(t *testing.T) {
	s := loadCompose(t)
	image := ""
	for name, svc := range s.services {
		img := str(svc, "image")
		if image == "" {
			image = img
		}
		if img == "" || img != image {
			t.Errorf("service %s: image %q, others %q", name, img, image)
		}
	}
	_, subnet, err := net.ParseCIDR(str(s.doc, "networks", "rocketraft", "ipam", "config", "0", "subnet"))
	if err != nil {
		t.Fatalf("network subnet: %v", err)
	}
	nsName := ""
	for name, svc := range s.services {
		if strs(svc, "command")[0] == "mqnamesrv" {
			nsName = name
		}
	}
	nsAddr := net.JoinHostPort(nsName, strconv.Itoa(port(t, s.namesrv.ListenAddr)))
	if host(t, s.namesrv.ListenAddr) != "0.0.0.0" {
		t.Errorf("name server listens on %s: other containers cannot reach it", s.namesrv.ListenAddr)
	}
	if s.proxy.NamesrvAddr != nsAddr {
		t.Errorf("proxy -n %q, want %q", s.proxy.NamesrvAddr, nsAddr)
	}
	checkHealth(t, nsName, s.services[nsName], s.namesrv.HTTPPort, "/metrics")

	var group []string
	for name, b := range s.brokers {
		svc := s.services[name]
		if b.NamesrvAddr != nsAddr {
			t.Errorf("%s: namesrvAddr %q, want %q", name, b.NamesrvAddr, nsAddr)
		}
		ip := str(svc, "networks", "rocketraft", "ipv4_address")
		if b.BrokerIP1 != ip || !subnet.Contains(net.ParseIP(ip)) {
			t.Errorf("%s: brokerIP1 %q, its fixed address %q (subnet %s)", name, b.BrokerIP1, ip, subnet)
		}
		if !b.EnableDLegerCommitLog {
			t.Errorf("%s: not a DLedger node", name)
		}
		self, err := b.SelfPeer()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if h := host(t, self.Addr); h != name || str(svc, "hostname") != name {
			t.Errorf("%s: its own peer address %s (hostname %q): want the service name", name, self.Addr, str(svc, "hostname"))
		}
		if b.HTTPPort == 0 || b.HTTPBindAddress != "0.0.0.0" {
			t.Errorf("%s: httpPort %d on %s: the healthcheck and the host cannot read it", name, b.HTTPPort, b.HTTPBindAddress)
		}
		checkHealth(t, name, svc, b.HTTPPort, broker.ReadyPath)
		group = append(group, b.BrokerName+"/"+b.DLegerPeers)
	}
	// Every node of the group lists the same peers, and the peers are exactly the nodes.
	slices.Sort(group)
	if group = slices.Compact(group); len(group) != 1 {
		t.Fatalf("the nodes disagree on their group: %q", group)
	}
	for _, b := range s.brokers {
		peers, _ := b.DLegerPeerList()
		var hosts []string
		for _, p := range peers {
			hosts = append(hosts, host(t, p.Addr))
		}
		var names []string
		for name := range s.brokers {
			names = append(names, name)
		}
		slices.Sort(hosts)
		slices.Sort(names)
		if !slices.Equal(hosts, names) || len(peers) != 3 {
			t.Errorf("dLegerPeers hosts %v, broker services %v: want the same three", hosts, names)
		}
		break
	}
	checkHealth(t, "proxy", s.services["proxy"], s.proxy.MetricsPromExporterPort, "/metrics")
	if s.proxy.MetricsExporterType != proxy.MetricsProm {
		t.Errorf("proxy metricsExporterType %q: its healthcheck reads /metrics", s.proxy.MetricsExporterType)
	}
	// The ports published to the host are ones the containers listen on.
	listening := composePorts(t)
	for name, svc := range s.services {
		for _, p := range strs(svc, "ports") {
			parts := strings.Split(p, ":")
			n, err := strconv.Atoi(parts[len(parts)-1])
			if err != nil || !slices.Contains(listening, n) {
				t.Errorf("%s publishes %q: no process listens on that container port", name, p)
			}
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				t.Errorf("%s publishes %q: want it on the host's loopback only", name, p)
			}
		}
	}
}

// checkHealth asserts that a service's healthcheck GETs path on 127.0.0.1:httpPort.
func checkHealth(t *testing.T, name string, svc any, httpPort int, path string) {
	t.Helper()
	test := strs(svc, "healthcheck", "test")
	if len(test) < 2 || test[0] != "CMD" || test[1] != "wget" {
		t.Errorf("%s: healthcheck %q: want [CMD wget ...] (the image's busybox wget)", name, test)
		return
	}
	u, err := url.Parse(test[len(test)-1])
	if err != nil || u.Host != net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort)) || u.Path != path {
		t.Errorf("%s: healthcheck reads %q, want http://127.0.0.1:%d%s", name, test[len(test)-1], httpPort, path)
	}
}

// port returns the port of a host:port address.
func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	n, err2 := strconv.Atoi(p)
	if err != nil || err2 != nil {
		t.Fatalf("address %q has no port", addr)
	}
	return n
}

// host returns the host of a host:port address.
func host(t *testing.T, addr string) string {
	t.Helper()
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return h
}
