package proxy

import "context"

// groupOrderly reports whether group consumes in FIFO order (consumeMessageOrderly on the
// brokers). Until the proxy reads that flag every group is treated as concurrent: QueryAssignment
// hands out one POP-all-queues assignment per broker group, and Settings say fifo=false.
func (m *messaging) groupOrderly(context.Context, string) bool { return false }
