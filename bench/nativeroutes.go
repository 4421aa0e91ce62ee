package bench

import (
	"fmt"
	"io"
)

// nativeRoutes holds the queues the native producer sends to, renewed from the name server when a
// send finds a dead broker address.
type nativeRoutes = renewable[[]nativeQueue]

// newNativeRoutes returns the routes starting with qs; fetch looks a fresh route up.
func newNativeRoutes(qs []nativeQueue, fetch func() ([]nativeQueue, error), log io.Writer) *nativeRoutes {
	return &nativeRoutes{v: qs, what: "route", log: log, fresh: func() ([]nativeQueue, error) {
		fresh, err := fetch()
		if err == nil && len(fresh) == 0 {
			err = fmt.Errorf("no writable queue")
		}
		return fresh, err
	}}
}
