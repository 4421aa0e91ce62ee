package admin

import (
	"errors"
	"fmt"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrUsage marks a bad command line (missing or conflicting flags); Main exits 2 for it.
	ErrUsage = errors.New("usage error")
	// ErrNoNameServer means neither -n nor NAMESRV_ADDR gave a name server address.
	ErrNoNameServer = errors.New("no name server address: pass -n 'host:port[;host:port]' or set NAMESRV_ADDR")
	// ErrClusterNotFound means the name server knows no cluster of that name.
	ErrClusterNotFound = errors.New("cluster not found")
	// ErrNoMaster means a route or cluster has no master (broker id 0) to ask.
	ErrNoMaster = errors.New("no master broker")
	// ErrNotFound means the query succeeded but found nothing to show.
	ErrNotFound = errors.New("not found")
)

// ResponseError is a peer's non-SUCCESS answer: its address, RocketMQ response code and remark.
type ResponseError struct {
	Addr   string
	Code   int32
	Remark string
}

// Error renders the answer, e.g. "127.0.0.1:9876 answered code 17: No topic route info ...".
func (e *ResponseError) Error() string {
	remark := e.Remark
	if remark == "" {
		remark = "(no remark)"
	}
	return fmt.Sprintf("%s answered code %d: %s", e.Addr, e.Code, remark)
}

// IsCode reports whether err is (or wraps) a ResponseError with the given response code.
func IsCode(err error, code int32) bool {
	var re *ResponseError
	return errors.As(err, &re) && re.Code == code
}

type usageError struct{ msg string }

func (e usageError) Error() string        { return e.msg }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// usagef returns an error that errors.Is ErrUsage, with the formatted text as its message.
func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }
