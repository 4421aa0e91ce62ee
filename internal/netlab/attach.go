package netlab

import (
	"fmt"
	"strings"
)

// Attach returns a handle on hosts of a lab that another process built and owns: a child test
// started inside one of the lab's hosts (integration/labhosts_test.go) gets the hosts' names and
// addresses from its parent and needs to cut and heal links itself, while the processes run.
// The handle can Cut, CutOneWay, Isolate and Heal among the given hosts; its Close removes
// nothing (the namespaces stay the builder's to delete). Every host must name an existing
// network namespace.
func Attach(hosts []*Host) (*Lab, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("netlab: attach to no hosts")
	}
	l := &Lab{cuts: map[[2]string]bool{}}
	for _, h := range hosts {
		if h == nil || h.Name == "" || h.IP == "" {
			return nil, fmt.Errorf("netlab: attach: host %v needs a namespace name and an address", h)
		}
		if !nsExists(h.Name) {
			return nil, fmt.Errorf("netlab: attach: no network namespace %q", h.Name)
		}
		l.hosts = append(l.hosts, &Host{Name: h.Name, IP: h.IP})
	}
	l.name, _, _ = strings.Cut(hosts[0].Name, "-h")
	return l, nil
}
