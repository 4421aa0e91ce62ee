package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Header errors returned by FromExt. They are wrapped with the offending field name.
var (
	ErrMissingField = errors.New("protocol: missing required header field")
	ErrBadField     = errors.New("protocol: malformed header field")
)

// Header is a typed custom header that travels flattened in extFields (§1.7).
type Header interface {
	// ToExt returns the header as extFields: Java field names → decimal/boolean/verbatim strings.
	// Optional fields at their zero value are omitted.
	ToExt() map[string]string
	// FromExt fills the header from extFields, failing on a missing required field or an
	// unparsable value; unknown keys are ignored.
	FromExt(ext map[string]string) error
}

// extReader reads typed fields from extFields and keeps the first error. With fromSend, send
// replaces the map: a send header's fields gathered one by one (SendHeaderFields), in the
// naming form. send is a copy, not a pointer: the reader's error is returned, and a pointer
// beside it would make the gathered fields escape to the heap.
type extReader struct {
	ext      map[string]string
	send     sendHeaderValues
	form     int
	fromSend bool
	err      error
}

// find returns a field and whether it is present.
func (r *extReader) find(key string) (string, bool) {
	if r.fromSend {
		i := sendHeaderIndex(key, r.form)
		return r.send.vals[i], r.send.present&(1<<i) != 0
	}
	v, ok := r.ext[key]
	return v, ok
}

func (r *extReader) fail(base error, key, val string) {
	if r.err != nil {
		return
	}
	if val == "" {
		r.err = fmt.Errorf("%w: %s", base, key)
		return
	}
	r.err = fmt.Errorf("%w: %s=%q", base, key, val)
}

// get returns the raw value and whether it is present; a required absent key records an error.
func (r *extReader) get(key string, required bool) (string, bool) {
	v, ok := r.find(key)
	if !ok && required {
		r.fail(ErrMissingField, key, "")
	}
	return v, ok
}

func (r *extReader) str(key string, required bool) string {
	v, _ := r.get(key, required)
	return v
}

func (r *extReader) int64(key string, required bool) int64 {
	v, ok := r.get(key, required)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		r.fail(ErrBadField, key, v)
	}
	return n
}

func (r *extReader) int32(key string, required bool) int32 {
	v, ok := r.get(key, required)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		r.fail(ErrBadField, key, v)
	}
	return int32(n)
}

// optInt64 returns nil when the key is absent.
func (r *extReader) optInt64(key string) *int64 {
	if _, ok := r.find(key); !ok {
		return nil
	}
	n := r.int64(key, false)
	return &n
}

// optInt32 returns nil when the key is absent.
func (r *extReader) optInt32(key string) *int32 {
	if _, ok := r.find(key); !ok {
		return nil
	}
	n := r.int32(key, false)
	return &n
}

// boolean follows Java's Boolean.parseBoolean: "true" in any case is true, anything else false.
func (r *extReader) boolean(key string, required bool) bool {
	v, _ := r.get(key, required)
	return strings.EqualFold(v, "true")
}

// optBool returns nil when the key is absent.
func (r *extReader) optBool(key string) *bool {
	if _, ok := r.find(key); !ok {
		return nil
	}
	b := r.boolean(key, false)
	return &b
}

// extWriter builds extFields.
type extWriter map[string]string

func (w extWriter) str(key, v string)          { w[key] = v }
func (w extWriter) int64(key string, v int64)  { w[key] = strconv.FormatInt(v, 10) }
func (w extWriter) int32(key string, v int32)  { w[key] = strconv.FormatInt(int64(v), 10) }
func (w extWriter) boolean(key string, v bool) { w[key] = strconv.FormatBool(v) }
func (w extWriter) optStr(key, v string) {
	if v != "" {
		w[key] = v
	}
}
func (w extWriter) optInt64(key string, v *int64) {
	if v != nil {
		w.int64(key, *v)
	}
}
func (w extWriter) optInt32(key string, v *int32) {
	if v != nil {
		w.int32(key, *v)
	}
}
func (w extWriter) optBool(key string, v *bool) {
	if v != nil {
		w.boolean(key, *v)
	}
}
