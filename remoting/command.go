package remoting

import (
	"fmt"
	"strconv"
	"time"
)

// Serialize types carried in the high byte of the header word.
const (
	SerializeJSON     byte = 0
	SerializeRocketMQ byte = 1
)

// Flag bits of a command.
const (
	FlagResponse int32 = 1 << 0
	FlagOneway   int32 = 1 << 1
)

// ServerVersion is the version ordinal this project puts in every command it
// sends: V4_9_4 (401), so Java clients treat us as a modern 4.x broker and
// enable SQL92 filters and standard-JSON routes.
const ServerVersion int32 = 401

// ServerLanguage is the language name written in JSON headers. Java decodes it
// into its LanguageCode enum, so it must be a valid enum name.
const ServerLanguage = "JAVA"

// Command is one remoting request or response. Requests and responses share the
// type because the wire format does; Flag tells them apart.
type Command struct {
	Code      int32
	Language  string
	Version   int32
	Opaque    int32
	Flag      int32
	Remark    string
	ExtFields map[string]string
	// Body is written to the connection from here, after the header, not copied into a frame:
	// it must not change once the command is handed to a connection (Invoke*, Reply, an answer)
	// until the write is done, which for InvokeAsync, InvokeOneway and answers is after they
	// return. Share it freely; do not reuse its array for another message meanwhile.
	Body          []byte
	SerializeType byte

	// Set by a server connection on requests it reads (flow.go): held is what the request
	// charged to the server's read budget, size its frame's length (the connection's pending
	// bytes), deferred whether its handler called Conn.Defer (its pending slot is freed when
	// it is answered, not when the handler returns).
	held, size int
	deferred   bool
	// arrival is the request's position among the requests its server connection has read
	// (1, 2, ...); see Arrival.
	arrival uint64
	// received is when the server connection read the request; see Received.
	received time.Time
	// flatExt holds the extFields of a command decoded flat (flatext.go) while ExtFields is nil.
	flatExt []extField
}

// Received is when a server connection read the request (the read from the socket that made its
// frame whole returned: requests pipelined into one read share its time), or the zero time for a
// command no server connection read. A handler that needs the time of a request (a send's
// store timestamp, a deadline) uses it instead of reading the clock again: a clock read costs
// about 0.1 us on the virtual machines the benchmarks run on, and a send read it nine times.
func (c *Command) Received() time.Time { return c.received }

// ReceivedOrNow is Received, or the current time for a command no server connection read (one a
// test or another component built and handed to a handler).
func (c *Command) ReceivedOrNow() time.Time {
	if c.received.IsZero() {
		return time.Now()
	}
	return c.received
}

// Arrival is the request's position among the requests read from its connection (1 for the
// first), or 0 for a command no server connection read. Requests of one connection are served
// concurrently, so a handler that must not let an earlier request undo a later one of the same
// client (two commits of one queue's consumer offset) compares their arrivals.
func (c *Command) Arrival() uint64 { return c.arrival }

// NewRequest builds a request to send; the opaque is assigned when it is sent.
func NewRequest(code int32, ext map[string]string, body []byte) *Command {
	if ext == nil {
		ext = map[string]string{}
	}
	return &Command{Code: code, Language: ServerLanguage, Version: ServerVersion, ExtFields: ext, Body: body}
}

// NewFlatRequest builds a request whose fields are given with AppendExt, room made for fields
// of them: a request built per message (a load generator's send) then costs no map.
func NewFlatRequest(code int32, fields int, body []byte) *Command {
	return &Command{Code: code, Language: ServerLanguage, Version: ServerVersion, flatExt: make([]extField, 0, fields), Body: body}
}

// NewResponse builds the response to c: same opaque and serialize type, so the
// peer can match it and decode it the way it encoded its request.
func (c *Command) NewResponse(code int32, remark string) *Command {
	return &Command{
		Code:          code,
		Language:      ServerLanguage,
		Version:       ServerVersion,
		Opaque:        c.Opaque,
		Flag:          FlagResponse,
		Remark:        remark,
		SerializeType: c.SerializeType,
	}
}

// IsResponse reports whether the response bit is set.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the sender asked for no answer. The Go client never
// sets this bit, so answering is the norm.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Ext returns one header field, or "" when it is absent.
func (c *Command) Ext(key string) string {
	v, _ := c.lookupExt(key)
	return v
}

// SetExt sets one header field.
func (c *Command) SetExt(key, value string) {
	if c.ExtFields == nil && c.flatExt == nil {
		c.ExtFields = make(map[string]string, 8)
	}
	c.Fields()[key] = value
}

// ExtInt64 parses a required integer header field, naming it in the error.
func (c *Command) ExtInt64(key string) (int64, error) {
	v, ok := c.lookupExt(key)
	if !ok || v == "" {
		return 0, fmt.Errorf("the custom field <%s> is null", key)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the custom field <%s> is not an integer: %q", key, v)
	}
	return n, nil
}

// ExtInt32 parses a required 32-bit integer header field.
func (c *Command) ExtInt32(key string) (int32, error) {
	n, err := c.ExtInt64(key)
	if err != nil {
		return 0, err
	}
	if n < -1<<31 || n > 1<<31-1 {
		return 0, fmt.Errorf("the custom field <%s> is out of int range: %d", key, n)
	}
	return int32(n), nil
}

// ExtInt64Or parses an optional integer header field, returning def when it is
// absent or unparsable.
func (c *Command) ExtInt64Or(key string, def int64) int64 {
	n, err := c.ExtInt64(key)
	if err != nil {
		return def
	}
	return n
}

// ExtBool parses a boolean header field the way Java does: "true" in any case
// is true, anything else false.
func (c *Command) ExtBool(key string) bool {
	v := c.Ext(key)
	return len(v) == 4 && (v[0]|0x20) == 't' && (v[1]|0x20) == 'r' && (v[2]|0x20) == 'u' && (v[3]|0x20) == 'e'
}

// String renders the command for logs without its body.
func (c *Command) String() string {
	return fmt.Sprintf("code=%d opaque=%d flag=%d remark=%q ext=%s body=%dB", c.Code, c.Opaque, c.Flag, c.Remark, c.extForLog(), len(c.Body))
}
