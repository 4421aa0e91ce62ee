package bench

// readFrom points every queue at addr (--read-addr), so that a consumer reads a chosen member
// of the group, e.g. a follower serving pulls from its replica, instead of the route's master.
// An empty addr leaves the queues as they are.
func readFrom(qs []nativeQueue, addr string) []nativeQueue {
	if addr == "" {
		return qs
	}
	for i := range qs {
		qs[i].addr = addr
	}
	return qs
}
