package bench

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"rocketraft/remoting"
)

// How a send that failed on a dead broker address is retried (ProduceConfig.RouteRetries bounds
// the attempts): an application's producer facing a failover should fetch a fresh route and try
// again at once, not keep sending to the dead master until its client's periodic route refresh
// (30 s in the official clients).
const (
	// DefaultRouteRetries is the default of ProduceConfig.RouteRetries.
	DefaultRouteRetries = 8
	// rerouteFirstBackoff is the pause before the first retry; it doubles up to rerouteMaxBackoff,
	// so 8 retries span about 2.5 s, enough for an election and the new master's registration.
	rerouteFirstBackoff = 50 * time.Millisecond
	rerouteMaxBackoff   = 500 * time.Millisecond
	// minRenewInterval spaces route renewals: many goroutines fail together when a broker dies,
	// and one fresh route serves them all.
	minRenewInterval = 100 * time.Millisecond
)

// sendFailure classifies a failed send for the retry decision.
type sendFailure int

const (
	// failOther: not retried here (a broker's refusal, a timeout after which the message may
	// have been stored): counted as an error.
	failOther sendFailure = iota
	// failDeadAddress: the address answered with a refused, reset or closed connection, or the
	// broker there answered SERVICE_NOT_AVAILABLE (a node of a group without a leader, which
	// clients are to retry); a fresh route is fetched before the retry.
	failDeadAddress
	// failNoRoute: the client has no route (yet) for the topic or broker; retried after a pause
	// on the same client, which is fetching one.
	failNoRoute
)

// classifySend tells what kind of failure err is.
func classifySend(err error) sendFailure {
	if err == nil {
		return failOther
	}
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, io.EOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, remoting.ErrConnClosed) {
		return failDeadAddress
	}
	if errors.Is(err, errNoRoute) {
		return failNoRoute
	}
	// The official client flattens some errors into text.
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"connection refused", "connection reset", "broken pipe", "use of closed network connection", "no route to host",
		"service_not_available", "service not available"} {
		if strings.Contains(msg, s) {
			return failDeadAddress
		}
	}
	if strings.Contains(msg, "route info not found") || strings.Contains(msg, "route not found") {
		return failNoRoute
	}
	return failOther
}

// rerouteBackoff is the pause before retry number attempt (1-based).
func rerouteBackoff(attempt int) time.Duration {
	d := rerouteFirstBackoff
	for i := 1; i < attempt && d < rerouteMaxBackoff; i++ {
		d *= 2
	}
	return min(d, rerouteMaxBackoff)
}

// retrier runs a send with bounded retries on dead addresses and missing routes, counting the
// retried sends for the summary.
type retrier struct {
	max     int            // retries per send; 0 disables them
	stopped *atomic.Bool   // the run is over: no more retries
	retried *atomic.Uint64 // sends that needed at least one retry (shared by a run's retriers)
	renew   func(gen uint64)
}

// do calls send until it succeeds, fails in a way not retried, or max retries were made. send
// gets the generation of the route it uses (see renew) and returns it with its error; a dead
// address renews that generation's route before the next attempt.
func (r *retrier) do(send func() (gen uint64, err error)) error {
	gen, err := send()
	for attempt := 1; err != nil && attempt <= r.max && !r.stopped.Load(); attempt++ {
		kind := classifySend(err)
		if kind == failOther {
			return err
		}
		if attempt == 1 {
			r.retried.Add(1)
		}
		if kind == failDeadAddress && r.renew != nil {
			r.renew(gen)
		}
		time.Sleep(rerouteBackoff(attempt))
		gen, err = send()
	}
	return err
}
