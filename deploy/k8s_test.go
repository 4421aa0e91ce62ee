package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"rocketraft/broker"
)

// k8sRunAsUser is the uid every pod runs as: the Containerfile's USER.
const k8sRunAsUser = 10001

// k8sObjects reads every resource deploy/k8s/kustomization.yaml lists, by kind and name.
func k8sObjects(t *testing.T) map[string]map[string]any {
	t.Helper()
	k := yamlDocs(t, "deploy/k8s/kustomization.yaml")
	out := map[string]map[string]any{}
	for _, r := range strs(k[0], "resources") {
		for _, d := range yamlDocs(t, "deploy/k8s/"+r) {
			key := str(d, "kind") + "/" + str(d, "metadata", "name")
			if _, dup := out[key]; dup {
				t.Fatalf("%s twice", key)
			}
			out[key] = d
		}
	}
	return out
}

// containerPort finds a container's port by name or number.
func containerPort(c any, ref string) int {
	for _, p := range list(c, "ports") {
		if str(p, "name") == ref || str(p, "containerPort") == ref {
			n, _ := strconv.Atoi(str(p, "containerPort"))
			return n
		}
	}
	return 0
}

// podSecurity asserts that a pod template runs as the image's non-root user.
func podSecurity(t *testing.T, what string, spec any) {
	t.Helper()
	if str(spec, "securityContext", "runAsNonRoot") != "true" || str(spec, "securityContext", "runAsUser") != strconv.Itoa(k8sRunAsUser) {
		t.Errorf("%s: securityContext %v: want runAsNonRoot and runAsUser %d", what, get(spec, "securityContext"), k8sRunAsUser)
	}
	for _, c := range list(spec, "containers") {
		if str(c, "securityContext", "allowPrivilegeEscalation") != "false" {
			t.Errorf("%s/%s: allowPrivilegeEscalation not false", what, str(c, "name"))
		}
	}
}

// selects reports whether a label selector (matchLabels or a Service's selector) matches labels.
func selects(selector, labels any) bool {
	sel, _ := selector.(map[string]any)
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if str(labels, k) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// TestKubernetes checks the manifests against what the binaries load: a StatefulSet per group
// with as many replicas as dLegerPeers entries, each entry n<ordinal> at the pod's stable name
// under a headless Service that publishes not-ready pods; every pod's command, expanded as its
// shell runs it for each ordinal, loads with its own id in the peers; readiness from the node's
// /status/ready on the HTTP port the configuration sets; a name server Deployment+Service both
// brokers and proxies point at; a proxy Deployment; non-root pods.
func TestKubernetes(t *testing.T) {
	objs := k8sObjects(t)
	var groups int
	for key, sts := range objs {
		if !strings.HasPrefix(key, "StatefulSet/") {
			continue
		}
		groups++
		name := str(sts, "metadata", "name")
		replicas, _ := strconv.Atoi(str(sts, "spec", "replicas"))
		pod := get(sts, "spec", "template")
		podSecurity(t, key, get(pod, "spec"))
		if !selects(get(sts, "spec", "selector", "matchLabels"), get(pod, "metadata", "labels")) {
			t.Errorf("%s: its selector does not match its pods", key)
		}
		if p := str(sts, "spec", "podManagementPolicy"); p != "Parallel" {
			t.Errorf("%s: podManagementPolicy %q: with OrderedReady the first pod waits for a leader that needs the second", key, p)
		}
		svcName := str(sts, "spec", "serviceName")
		svc := objs["Service/"+svcName]
		if svc == nil || str(svc, "spec", "clusterIP") != "None" || str(svc, "spec", "publishNotReadyAddresses") != "true" {
			t.Fatalf("%s: serviceName %q: want a headless Service publishing not-ready addresses", key, svcName)
		}
		if !selects(get(svc, "spec", "selector"), get(pod, "metadata", "labels")) {
			t.Errorf("Service/%s does not select the pods of %s", svcName, key)
		}
		if len(list(sts, "spec", "volumeClaimTemplates")) == 0 {
			t.Errorf("%s: no volumeClaimTemplates", key)
		}
		c := get(pod, "spec", "containers", "0")
		files := map[string]string{}
		for _, m := range list(c, "volumeMounts") {
			for _, v := range list(pod, "spec", "volumes") {
				cm := str(v, "configMap", "name")
				if str(v, "name") != str(m, "name") || cm == "" {
					continue
				}
				for file, content := range get(objs["ConfigMap/"+cm], "data").(map[string]any) {
					files[str(m, "mountPath")+"/"+file] = "data:" + fmt.Sprint(content)
				}
			}
		}
		var peers string
		for i := range replicas {
			args := shellExpand(t, c, fmt.Sprintf("%s-%d", name, i), fmt.Sprintf("10.1.0.%d", 10+i))
			if args[0] != "mqbroker" {
				t.Fatalf("%s runs %q", key, args[0])
			}
			b := loadBroker(t, fmt.Sprintf("%s pod %d", key, i), args[1:], files)
			if peers == "" {
				peers = b.DLegerPeers
			}
			self, err := b.SelfPeer()
			if err != nil {
				t.Fatalf("%s pod %d: %v", key, i, err)
			}
			all, _ := b.DLegerPeerList()
			if len(all) != replicas {
				t.Errorf("%s: %d replicas, %d dLegerPeers", key, replicas, len(all))
			}
			wantHost := fmt.Sprintf("%s-%d.%s", name, i, svcName)
			if self.ID != fmt.Sprintf("n%d", i) || host(t, self.Addr) != wantHost {
				t.Errorf("%s pod %d: its peer entry %s-%s, want n%d at %s", key, i, self.ID, self.Addr, i, wantHost)
			}
			if b.BrokerIP1 != fmt.Sprintf("10.1.0.%d", 10+i) {
				t.Errorf("%s pod %d: brokerIP1 %q: want the pod IP", key, i, b.BrokerIP1)
			}
			if b.NamesrvAddr != namesrvService(t, objs) {
				t.Errorf("%s: namesrvAddr %q, the name server Service is %q", key, b.NamesrvAddr, namesrvService(t, objs))
			}
			for ref, want := range map[string]int{"remoting": b.ListenPort, "raft": port(t, self.Addr), "http": b.HTTPPort} {
				if got := containerPort(c, ref); got != want || want == 0 {
					t.Errorf("%s: container port %s = %d, configuration %d", key, ref, got, want)
				}
			}
			probe := get(c, "readinessProbe", "httpGet")
			if str(probe, "path") != broker.ReadyPath || containerPort(c, str(probe, "port")) != b.HTTPPort {
				t.Errorf("%s: readiness GETs %v, want %s on httpPort %d", key, probe, broker.ReadyPath, b.HTTPPort)
			}
			if b.HTTPBindAddress != "0.0.0.0" {
				t.Errorf("%s: httpBindAddress %q: the kubelet probes the pod IP", key, b.HTTPBindAddress)
			}
			var mounted bool
			for _, m := range list(c, "volumeMounts") {
				if str(m, "name") == str(sts, "spec", "volumeClaimTemplates", "0", "metadata", "name") &&
					strings.HasPrefix(b.StorePathRootDir, str(m, "mountPath")+"/") {
					mounted = true
				}
			}
			if !mounted {
				t.Errorf("%s: storePathRootDir %s is not on the volume claim", key, b.StorePathRootDir)
			}
		}
		for _, p := range list(svc, "spec", "ports") {
			if containerPort(c, str(p, "targetPort")) == 0 {
				t.Errorf("Service/%s port %v: no such container port", svcName, p)
			}
		}
		if pdb := objs["PodDisruptionBudget/"+name]; pdb == nil || str(pdb, "spec", "maxUnavailable") != "1" {
			t.Errorf("%s: want a PodDisruptionBudget with maxUnavailable 1 (a majority stays up)", key)
		}
	}
	if groups == 0 {
		t.Fatal("no StatefulSet")
	}

	px := objs["Deployment/rocketraft-proxy"]
	if px == nil {
		t.Fatal("no Deployment/rocketraft-proxy")
	}
	podSecurity(t, "Deployment/rocketraft-proxy", get(px, "spec", "template", "spec"))
	pc := get(px, "spec", "template", "spec", "containers", "0")
	cmd := strs(pc, "command")
	cfg := loadProxy(t, "Deployment/rocketraft-proxy", cmd[1:])
	if cfg.NamesrvAddr != namesrvService(t, objs) {
		t.Errorf("proxy -n %q, the name server Service is %q", cfg.NamesrvAddr, namesrvService(t, objs))
	}
	if containerPort(pc, "grpc") != cfg.GrpcServerPort || containerPort(pc, "remoting") != cfg.RemotingListenPort {
		t.Errorf("proxy container ports %v, configuration grpc %d remoting %d", get(pc, "ports"), cfg.GrpcServerPort, cfg.RemotingListenPort)
	}
	if containerPort(pc, str(pc, "readinessProbe", "tcpSocket", "port")) != cfg.GrpcServerPort {
		t.Errorf("proxy readiness %v: want the gRPC port", get(pc, "readinessProbe"))
	}
	for _, s := range []string{"Service/rocketraft-proxy", "Service/rocketraft-namesrv"} {
		svc := objs[s]
		owner := objs["Deployment/"+strings.TrimPrefix(s, "Service/")]
		if svc == nil || owner == nil || !selects(get(svc, "spec", "selector"), get(owner, "spec", "template", "metadata", "labels")) {
			t.Errorf("%s: missing or selects no pod of its Deployment", s)
			continue
		}
		oc := get(owner, "spec", "template", "spec", "containers", "0")
		for _, p := range list(svc, "spec", "ports") {
			if containerPort(oc, str(p, "targetPort")) == 0 {
				t.Errorf("%s port %v: no such container port", s, p)
			}
		}
	}
}

// namesrvService is the name server's in-cluster address: its Service's name and remoting port,
// after checking that the Deployment behind it listens there on every interface.
func namesrvService(t *testing.T, objs map[string]map[string]any) string {
	t.Helper()
	d := objs["Deployment/rocketraft-namesrv"]
	if d == nil {
		t.Fatal("no Deployment/rocketraft-namesrv")
	}
	spec := get(d, "spec", "template", "spec")
	podSecurity(t, "Deployment/rocketraft-namesrv", spec)
	c := get(spec, "containers", "0")
	ns := loadNamesrv(t, "Deployment/rocketraft-namesrv", strs(c, "command")[1:])
	if host(t, ns.ListenAddr) != "0.0.0.0" || containerPort(c, "remoting") != port(t, ns.ListenAddr) {
		t.Errorf("name server listens on %s, container port remoting %d", ns.ListenAddr, containerPort(c, "remoting"))
	}
	for _, p := range list(objs["Service/rocketraft-namesrv"], "spec", "ports") {
		if str(p, "name") == "remoting" {
			return "rocketraft-namesrv:" + str(p, "port")
		}
	}
	t.Fatal("Service/rocketraft-namesrv has no remoting port")
	return ""
}

// shellExpand returns the mqbroker command line a pod's command runs in pod podName with podIP:
// a ["/bin/sh", "-c", "exec mqbroker ..."] command is run by this machine's /bin/sh with the
// variables the container's env sets from the pod's name and IP, and a stand-in mqbroker that
// prints its arguments. The env must set POD_NAME and POD_IP from the downward API.
func shellExpand(t *testing.T, c any, podName, podIP string) []string {
	t.Helper()
	cmd := strs(c, "command")
	if len(cmd) != 3 || cmd[0] != "/bin/sh" || cmd[1] != "-c" {
		return cmd
	}
	from := map[string]string{}
	for _, e := range list(c, "env") {
		from[str(e, "name")] = str(e, "valueFrom", "fieldRef", "fieldPath")
	}
	if from["POD_NAME"] != "metadata.name" || from["POD_IP"] != "status.podIP" {
		t.Fatalf("container env %v: want POD_NAME from metadata.name and POD_IP from status.podIP", from)
	}
	if !strings.HasPrefix(cmd[2], "exec mqbroker ") {
		t.Fatalf("pod command %q: want exec mqbroker (the broker as PID 1 gets SIGTERM)", cmd[2])
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mqbroker"), []byte("#!/bin/sh\nprintf '%s\\n' mqbroker \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("/bin/sh", "-c", cmd[2])
	sh.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "POD_NAME=" + podName, "POD_IP=" + podIP}
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("pod command %q under /bin/sh: %v", cmd[2], err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}
