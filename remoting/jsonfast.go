package remoting

import (
	"errors"
	"strconv"
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
// of the broker's CPU there.
func fastJSONHeader(b []byte) (*Command, error) {
	p := jsonParser{b: b}
	c := &Command{}
	if !p.consume('{') {
		return nil, errSlowPath
	}
	if p.consume('}') {
		c.ExtFields = map[string]string{}
		return c, p.end()
	}
	for {
		key, ok := p.str()
		if !ok || !p.consume(':') {
			return nil, errSlowPath
		}
		switch key {
		case "code", "version", "opaque", "flag":
			n, ok := p.int32()
			if !ok {
				return nil, errSlowPath
			}
			switch key {
			case "code":
				c.Code = n
			case "version":
				c.Version = n
			case "opaque":
				c.Opaque = n
			default:
				c.Flag = n
			}
		case "language":
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
			m, ok := p.stringMap()
			if !ok {
				return nil, errSlowPath
			}
			c.ExtFields = m
		case "serializeTypeCurrentRPC":
			if !p.null() {
				if _, ok := p.str(); !ok {
					return nil, errSlowPath
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
	if c.ExtFields == nil {
		c.ExtFields = map[string]string{}
	}
	return c, p.end()
}

type jsonParser struct {
	b []byte
	i int
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
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || (p.b[digits] == '0' && p.i-digits > 1) {
		return 0, false
	}
	if p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 32)
	return int32(n), err == nil
}

// str parses a JSON string; invalid UTF-8 and control characters are left to
// the general decoder.
func (p *jsonParser) str() (string, bool) {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	p.i++
	start := p.i
	ascii := true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return "", false
}

func (p *jsonParser) strEscaped(start int) (string, bool) {
	out := make([]byte, 0, p.i-start+16)
	out = append(out, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return "", false
			}
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
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
			out = utf8.AppendRune(out, r)
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
	if !p.consume('{') {
		return nil, false
	}
	m := make(map[string]string, 16)
	if p.consume('}') {
		return m, true
	}
	for {
		k, ok := p.key()
		if !ok || !p.consume(':') {
			return nil, false
		}
		v, ok := p.str()
		if !ok {
			return nil, false
		}
		m[k] = v
		if p.consume(',') {
			continue
		}
		return m, p.consume('}')
	}
}

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
	}
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = n
	}
	return m
}()

// key parses an object key, reusing the interned string for common names.
func (p *jsonParser) key() (string, bool) {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '"' {
		start := p.i + 1
		for j := start; j < len(p.b) && j-start <= 32; j++ {
			c := p.b[j]
			if c == '"' {
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
