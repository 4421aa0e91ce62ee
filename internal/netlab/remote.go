package netlab

// Remote returns a handle on hosts of a lab that another process built and owns: a test that
// runs again inside the lab's client host (integration/labhosts_test.go) gets its hosts' names
// and addresses from its parent, not the *Lab, and still needs to cut and heal links between
// them. Cut, CutOneWay, Isolate and Heal work on the given hosts as on the owner's Lab (the
// same nftables table in each host); Close removes nothing, the owner does. A cut made through
// one handle is only known to it: Heal through the same handle, or through the owner, which
// clears every host.
func Remote(hosts ...Host) *Lab {
	l := &Lab{name: "remote", cuts: map[[2]string]bool{}}
	for _, h := range hosts {
		h := h
		l.hosts = append(l.hosts, &h)
	}
	return l
}
