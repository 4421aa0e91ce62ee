package netlab

import (
	"fmt"
	"strconv"
)

// Attach returns a handle on hosts of a lab that another process built, so that process's
// children can cut and heal links among them: a test binary run again inside one host
// (integration/labhosts_test.go) learns the other hosts' names and addresses from its
// environment and drives the partitions itself. Cut, CutOneWay, Isolate and Heal work as on
// the builder's Lab, limited to the hosts given; Close only marks the handle closed, because
// the namespaces belong to the builder, which deletes them.
func Attach(hosts []Host) (*Lab, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("netlab: attach: no hosts given")
	}
	l := &Lab{cuts: map[[2]string]bool{}}
	for i := range hosts {
		h := hosts[i]
		m := nsPattern.FindStringSubmatch(h.Name)
		if m == nil || m[3] == "sw" || h.IP == "" {
			return nil, fmt.Errorf("netlab: attach: %q (%s) is not a lab host namespace", h.Name, h.IP)
		}
		pid, _ := strconv.Atoi(m[1])
		idx, _ := strconv.Atoi(m[2])
		name := labName(pid, idx)
		if l.name == "" {
			l.name, l.index = name, idx
		} else if name != l.name {
			return nil, fmt.Errorf("netlab: attach: %s belongs to lab %s, not %s", h.Name, name, l.name)
		}
		if !nsExists(h.Name) {
			return nil, fmt.Errorf("netlab: attach: namespace %s does not exist", h.Name)
		}
		l.hosts = append(l.hosts, &h)
	}
	return l, nil
}
