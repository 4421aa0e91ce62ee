package remoting

import (
	"errors"
	"math"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// errSlowPath tells decodeJSONHeader to re-parse with encoding/json. The fast
// parser handles what RocketMQ clients send (a flat object of integers and
// strings plus a string map); anything unusual — fractions, invalid UTF-8,
// lenient forms — goes to the general decoder, which also produces the error
// message for invalid input.
var errSlowPath = errors.New("remoting: header needs the general JSON decoder")

// fastJSONHeader parses a JSON header without reflection. The send and pull
// paths decode one header per request, and encoding/json costs about a third
// of the broker's CPU there. fields estimates how many fields the header
// holds at every depth (0: unknown), which sizes the extFields map; a header
// with more than MaxExtFields extFields goes to the general decoder, whose
// caller bounds it.
func fastJSONHeader(b []byte, fields int) (*Command, error) {
	return fastJSONHeaderKeeping(b, fields, flatRule{})
}

// fastJSONHeaderKeeping is fastJSONHeader keeping the extFields of the commands keep names flat
// (Command.ExtSeq) instead of building their map.
func fastJSONHeaderKeeping(b []byte, fields int, keep flatRule) (*Command, error) {
	p := jsonParser{b: b, fields: fields}
	c := &Command{}
	if !p.consume('{') {
		return nil, errSlowPath
	}
	if p.consume('}') {
		c.ExtFields = map[string]string{}
		return c, p.end()
	}
	codeSeen := false
	for {
		raw, plain, ok := p.rawStr()
		if !ok || !plain || !p.consume(':') {
			return nil, errSlowPath // an escaped key is rare enough for the general decoder
		}
		switch key := string(raw); key { // no allocation: the compiler compares the bytes
		case "code", "version", "opaque", "flag":
			n, ok := p.int32()
			if !ok {
				return nil, errSlowPath
			}
			switch key {
			case "code":
				c.Code, codeSeen = n, true
			case "version":
				c.Version = n
			case "opaque":
				c.Opaque = n
			default:
				c.Flag = n
			}
		case "language":
			start := p.i
			if raw, plain, ok := p.rawStr(); ok && plain {
				if l, known := languages[string(raw)]; known { // no allocation for a known name
					c.Language = l
					break
				}
			}
			p.i = start
			s, ok := p.str()
			if !ok {
				return nil, errSlowPath
			}
			c.Language = s
		case "remark":
			if p.null() {
				break
			}
			s, ok := p.str()
			if !ok {
				return nil, errSlowPath
			}
			c.Remark = s
		case "extFields":
			if p.null() {
				break
			}
			if keep.mayKeep(codeSeen, c.Code) {
				list, ok := p.stringList()
				if !ok {
					return nil, errSlowPath
				}
				if len(list) > 0 {
					c.flatExt = list
				}
				break
			}
			m, ok := p.stringMap()
			if !ok {
				return nil, errSlowPath
			}
			c.ExtFields = m
		case "serializeTypeCurrentRPC":
			if !p.null() {
				start := p.i
				if _, plain, ok := p.rawStr(); !ok {
					return nil, errSlowPath
				} else if !plain { // escapes must be valid too: decode it (rare)
					p.i = start
					if _, ok := p.str(); !ok {
						return nil, errSlowPath
					}
				}
			}
		default:
			return nil, errSlowPath
		}
		if p.consume(',') {
			continue
		}
		if p.consume('}') {
			break
		}
		return nil, errSlowPath
	}
	if c.flatExt != nil && !keep.keeps(c) {
		c.Fields() // kept flat on the strength of the code, but the flag after it says otherwise
	}
	if c.ExtFields == nil && c.flatExt == nil {
		c.ExtFields = map[string]string{}
	}
	return c, p.end()
}

type jsonParser struct {
	b      []byte
	i      int
	esc    int // the first backslash of the last string rawStr found escaped
	fields int // fields in b at every depth, estimated, 0 if unknown: a size hint for extFields
}

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) consume(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonParser) end() error {
	p.ws()
	if p.i != len(p.b) {
		return errSlowPath
	}
	return nil
}

func (p *jsonParser) null() bool {
	p.ws()
	if len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "null" {
		p.i += 4
		return true
	}
	return false
}

func (p *jsonParser) int32() (int32, bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	var n int64 // accumulated as scanned: no strconv pass over the digits again
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		if n <= math.MaxInt32+1 { // past that the number is out of range whatever follows
			n = n*10 + int64(p.b[p.i]-'0')
		}
		p.i++
	}
	if p.i == digits || (p.b[digits] == '0' && p.i-digits > 1) {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	if p.b[start] == '-' {
		n = -n
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// str parses a JSON string; invalid UTF-8 and control characters are left to
// the general decoder.
func (p *jsonParser) str() (string, bool) {
	start := p.i
	raw, plain, ok := p.rawStr()
	if !ok {
		return "", false
	}
	if !plain {
		p.i = start
		p.ws()
		content := p.i + 1
		p.i = p.esc // decode it from its first escape; the plain run before it is copied whole
		return p.strEscaped(content, len(raw))
	}
	return string(raw), true
}

// rawStr parses a JSON string without allocating: raw is what lies between
// the quotes, plain tells that it holds no escape (raw is then the value; when
// it does, p.esc is the position of its first backslash, where strEscaped can
// start). Invalid UTF-8 and control characters fail, as in str.
func (p *jsonParser) rawStr() (raw []byte, plain, ok bool) {
	p.ws()
	b, i := p.b, p.i // locals: the scan below touches no memory but the bytes
	if i >= len(b) || b[i] != '"' {
		return nil, false, false
	}
	i++
	start := i
	ascii, plain := true, true
	for i < len(b) {
		for i < len(b) && strClass[b[i]] == strPlain { // the common case, one load per byte
			i++
		}
		if i >= len(b) {
			break
		}
		switch strClass[b[i]] {
		case strQuote:
			s := b[start:i]
			p.i = i + 1
			if !ascii && plain && !utf8.Valid(s) {
				return nil, false, false
			}
			return s, plain, true
		case strBackslash:
			if plain {
				plain, p.esc = false, i
			}
			if i+1 < len(b) {
				i++ // the escaped character cannot end the string
			}
		case strControl:
			p.i = i
			return nil, false, false
		default: // strNonASCII
			ascii = false
		}
		i++
	}
	p.i = i
	return nil, false, false
}

// Byte classes inside a JSON string (strClass).
const (
	strPlain = iota
	strQuote
	strBackslash
	strControl
	strNonASCII
)

// strClass classifies every byte for rawStr's scan.
var strClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c == '"':
			t[c] = strQuote
		case c == '\\':
			t[c] = strBackslash
		case c < 0x20:
			t[c] = strControl
		case c >= utf8.RuneSelf:
			t[c] = strNonASCII
		}
	}
	return t
}()

// strEscaped decodes the string whose content starts at start, p.i being at or
// before its first escape; size is the length of its raw content (escapes only
// shorten it), for the one allocation of the value.
func (p *jsonParser) strEscaped(start, size int) (string, bool) {
	var out strings.Builder // String() does not copy: one allocation for the value
	out.Grow(size)
	out.Write(p.b[start:p.i])
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.ValidString(out.String()) {
				return "", false
			}
			return out.String(), true
		case c < 0x20:
			return "", false
		case c != '\\':
			j := p.i + 1 // copy the run up to the next escape, quote or control character
			for j < len(p.b) && p.b[j] != '\\' && p.b[j] != '"' && p.b[j] >= 0x20 {
				j++
			}
			out.Write(p.b[p.i:j])
			p.i = j
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out.WriteByte(e)
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					p.i += 2
					r2, ok := p.hex4()
					if !ok {
						return "", false
					}
					r = utf16.DecodeRune(r, r2)
					if r == utf8.RuneError {
						return "", false
					}
				} else {
					return "", false
				}
			}
			out.WriteRune(r)
		default:
			return "", false
		}
	}
	return "", false
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}

// stringMap parses extFields: an object whose values are strings. Other value
// types (numbers, booleans, null) go to the general decoder.
func (p *jsonParser) stringMap() (map[string]string, bool) {
	m := make(map[string]string, p.extFieldsHint())
	ok := p.stringFields(func(k, v string) bool {
		m[k] = v
		return len(m) <= MaxExtFields
	})
	return m, ok
}

// stringList parses extFields as stringMap does into a list in wire order: one allocation
// instead of a map's several and no hashing, for a reader that takes each field once.
func (p *jsonParser) stringList() ([]extField, bool) {
	list := make([]extField, 0, p.extFieldsHint()+2) // a peer writing fewer top-level fields does not grow it
	ok := p.stringFields(func(k, v string) bool {
		list = append(list, extField{key: k, value: v})
		return len(list) <= MaxExtFields
	})
	return list, ok
}

// extFieldsHint is how many extFields to make room for: the fields counted ahead less the top
// level's.
func (p *jsonParser) extFieldsHint() int {
	return min(max(p.fields-jsonTopLevelFields, 0), MaxExtFields)
}

// stringFields parses the extFields object, handing each key and value to add, which returns
// false to give up (too many fields).
func (p *jsonParser) stringFields(add func(k, v string) bool) bool {
	if !p.consume('{') {
		return false
	}
	// One string holds every plain value of the object (values are substrings
	// of it: the string runs from the first field to the header's end, the
	// few top-level fields after extFields included), so a header costs a few
	// allocations rather than one per field. A value kept for long keeps the
	// header's few hundred bytes alive with it.
	p.ws()
	base := p.i
	if p.consume('}') {
		return true
	}
	whole := string(p.b[base:])
	for {
		k, ok := p.key()
		if !ok || !p.consume(':') {
			return false
		}
		p.ws()
		vstart := p.i + 1 // after the opening quote, if it is a string
		raw, plain, ok := p.rawStr()
		if !ok {
			return false
		}
		var v string
		switch {
		case !plain:
			p.i = p.esc // decode it from its first escape; the plain run before it is copied whole
			if v, ok = p.strEscaped(vstart, len(raw)); !ok {
				return false
			}
		default:
			v = whole[vstart-base : vstart-base+len(raw)]
		}
		if !add(k, v) {
			return false
		}
		if p.consume(',') {
			continue
		}
		return p.consume('}')
	}
}

// jsonTopLevelFields is how many fields a client's header holds besides
// extFields' (code, language, version, opaque, flag, remark, extFields,
// serializeTypeCurrentRPC less the one or two a client leaves out): what
// stringMap subtracts from the counted fields to size the map.
const jsonTopLevelFields = 7

// internedKeys holds the extFields names clients send on every request, so
// parsing a header does not allocate a new string for each key.
var internedKeys = func() map[string]string {
	names := []string{
		"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
		"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
		"bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch", "bname",
		"consumerGroup", "queueOffset", "maxMsgNums", "commitOffset", "suspendTimeoutMillis", "subscription",
		"subVersion", "expressionType", "maxMsgBytes", "lo", "ns", "nsd", "oway",
		"msgId", "nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId", "offset", "timestamp",
		"MSG_REGION", "TRACE_ON", "AccessKey", "Signature", "clientID", "group",
		"transactionId",
	}
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = n
	}
	return m
}()

// oneByteKeys interns every one-character ASCII key (the compact field names of
// SEND_MESSAGE_V2 among them) without a map lookup.
var oneByteKeys = func() (t [utf8.RuneSelf]string) {
	for i := range t {
		t[i] = string(rune(i))
	}
	return t
}()

// languages holds the language names clients send, for the same reason.
var languages = map[string]string{"GO": "GO", "JAVA": "JAVA", "CPP": "CPP", "DOTNET": "DOTNET", "PYTHON": "PYTHON", "RUST": "RUST", "OTHER": "OTHER"}

// key parses an object key, reusing the interned string for common names.
func (p *jsonParser) key() (string, bool) {
	p.ws()
	if p.i+1 < len(p.b) && p.b[p.i] == '"' {
		start := p.i + 1
		c1 := p.b[start]
		for j := start; j < len(p.b) && j-start <= 32; j++ {
			c := p.b[j]
			if c == '"' {
				if j == start+1 && c1 >= 0x20 && c1 < utf8.RuneSelf && c1 != '\\' { // SEND_MESSAGE_V2's a..n
					p.i = j + 1
					return oneByteKeys[c1], true
				}
				if k, ok := internedKeys[string(p.b[start:j])]; ok {
					p.i = j + 1
					return k, true
				}
				break
			}
			if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
				break
			}
		}
	}
	return p.str()
}
