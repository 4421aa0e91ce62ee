package remoting

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// DefaultMaxFrameSize is the largest frame accepted, length field included, as
// in Java's NettyDecoder (com.rocketmq.remoting.frameMaxLength).
const DefaultMaxFrameSize = 16 * 1024 * 1024

// Sentinel decode errors; a connection that produces one is closed.
var (
	ErrFrameTooLarge = errors.New("remoting: frame too large")
	ErrBadFrame      = errors.New("remoting: malformed frame")
	ErrBadHeader     = errors.New("remoting: undecodable header")
)

var languageNames = []string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"}

func languageCode(name string) byte {
	for i, n := range languageNames {
		if n == name {
			return byte(i)
		}
	}
	return 0
}

func languageName(code byte) string {
	if int(code) < len(languageNames) {
		return languageNames[code]
	}
	return "OTHER"
}

// Encode renders c as a complete frame, length field included, in c's
// serialize type.
func Encode(c *Command) ([]byte, error) {
	return encodeFrame(c, len(c.Body))
}

// encodeHead renders c's frame without its body: the length field (which counts the body), the
// header word and the header. A connection writes the body after it from c.Body, so a message
// is not copied into a frame first.
func encodeHead(c *Command) ([]byte, error) {
	return encodeFrame(c, 0)
}

// encodeFrame renders c's frame with room for room bytes of body after the header, and appends
// the body when room holds it.
func encodeFrame(c *Command, room int) ([]byte, error) {
	// The header is rendered in place after the two length fields (patched in below), so a
	// frame is one allocation and the header is not copied.
	out := make([]byte, 8, 8+128+32*c.extCount()+len(c.Remark)+room)
	var err error
	if c.SerializeType == SerializeRocketMQ {
		out, err = encodeBinaryHeader(out, c)
	} else {
		out = encodeJSONHeader(out, c)
	}
	if err != nil {
		return nil, err
	}
	headerLen := len(out) - 8
	if headerLen > 0xFFFFFF {
		return nil, fmt.Errorf("remoting: header of %d bytes exceeds 24 bits: %w", headerLen, ErrBadHeader)
	}
	total := 4 + headerLen + len(c.Body)
	if total+4 > DefaultMaxFrameSize {
		return nil, fmt.Errorf("remoting: frame of %d bytes: %w", total+4, ErrFrameTooLarge)
	}
	binary.BigEndian.PutUint32(out[0:], uint32(total))
	binary.BigEndian.PutUint32(out[4:], uint32(c.SerializeType)<<24|uint32(headerLen))
	if room < len(c.Body) {
		return out, nil
	}
	return append(out, c.Body...), nil
}

// MaxHeaderSize bounds a frame's header (the serialised code, flags, remark and extFields).
// Clients' headers are a few hundred bytes; the largest legitimate one is a send whose message
// properties reach RocketMQ's 32,767-byte limit, JSON-escaped. A frame announcing more is refused
// on its header word, before any of the header is read or decoded.
const MaxHeaderSize = 256 * 1024

// MaxExtFields bounds the number of extFields a header may carry (requests carry at most a few
// dozen). Both header serialisations are refused as soon as the count passes it, before the
// rest of the header is decoded.
const MaxExtFields = 1024

// ErrHeaderTooLarge is wrapped by decode errors for a header over MaxHeaderSize bytes or with
// more than MaxExtFields fields.
var ErrHeaderTooLarge = errors.New("remoting: header too large")

// frameChunk is the first read size for a frame body: a buffer grows (by doubling, up to the
// announced length) only as bytes actually arrive, so a peer announcing a large frame and
// sending it slowly, or never, costs what it sent, not what it announced.
const frameChunk = 64 * 1024

// ReadFrame reads one frame from r and returns what follows the length field.
// maxFrame bounds the frame size including the length field.
func ReadFrame(r io.Reader, maxFrame int) ([]byte, error) {
	var pre [8]byte
	return readFrame(r, maxFrame, nil, &pre)
}

// readFrame is ReadFrame with reserve, when set, called with the size of each growth of the
// frame buffer before it is allocated (the server's global budget of bytes being read); an error
// from it ends the read. pre is scratch for the length and header words, owned by the caller
// (a connection's, so that reading a frame does not allocate it: it escapes through r).
func readFrame(r io.Reader, maxFrame int, reserve func(n int) error, pre *[8]byte) ([]byte, error) {
	if _, err := io.ReadFull(r, pre[:4]); err != nil {
		return nil, err
	}
	n := int64(binary.BigEndian.Uint32(pre[:4]))
	if n+4 > int64(maxFrame) {
		return nil, fmt.Errorf("frame length %d exceeds the limit of %d bytes: %w", n+4, maxFrame, ErrFrameTooLarge)
	}
	if n < 4 {
		return nil, fmt.Errorf("frame length %d is shorter than the header word: %w", n, ErrBadFrame)
	}
	if _, err := io.ReadFull(r, pre[4:]); err != nil {
		return nil, truncated(err, n)
	}
	if hlen := int64(binary.BigEndian.Uint32(pre[4:]) & 0xFFFFFF); hlen > MaxHeaderSize {
		return nil, fmt.Errorf("header length %d exceeds the limit of %d bytes: %w", hlen, MaxHeaderSize, ErrHeaderTooLarge)
	} else if hlen > n-4 {
		return nil, fmt.Errorf("header length %d exceeds frame of %d bytes: %w", hlen, n, ErrBadFrame)
	}
	size := int(min(n, frameChunk))
	if reserve != nil {
		if err := reserve(size); err != nil {
			return nil, err
		}
	}
	buf := make([]byte, 4, size)
	copy(buf, pre[4:])
	for int64(len(buf)) < n {
		if len(buf) == cap(buf) {
			grown := int(min(int64(2*cap(buf)), n))
			if reserve != nil {
				if err := reserve(grown - cap(buf)); err != nil {
					return nil, err
				}
			}
			next := make([]byte, len(buf), grown)
			copy(next, buf)
			buf = next
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		if err != nil && int64(len(buf)) < n {
			return nil, truncated(err, n)
		}
	}
	return buf, nil
}

// truncated describes a read that ended inside a frame of n announced bytes.
func truncated(err error, n int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("truncated frame (%d bytes announced): %w", n, ErrBadFrame)
	}
	return err
}

// countFields counts the colons outside strings of a JSON text: the number of object fields at
// every depth, so at least the number of extFields. It allocates nothing and stops counting
// past limit, so a header's field count is checked before the general decoder sees it.
func countFields(b []byte, limit int) int {
	n := 0
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case in:
		case c == ':':
			n++
			if n > limit {
				return n
			}
		}
	}
	return n
}

// jsonTopFields is how many fields a JSON header has besides extFields' entries (code,
// language, version, opaque, flag, remark, extFields, serializeTypeCurrentRPC, with room).
const jsonTopFields = 16

// Decode parses a frame without its length field (what ReadFrame returns). The
// body aliases frame.
func Decode(frame []byte) (*Command, error) {
	return decodeKeeping(frame, flatRule{})
}

// decodeKeeping is Decode keeping the extFields of the commands keep names flat (flatext.go).
func decodeKeeping(frame []byte, keep flatRule) (*Command, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("frame of %d bytes has no header word: %w", len(frame), ErrBadFrame)
	}
	word := binary.BigEndian.Uint32(frame)
	st := byte(word >> 24)
	hlen := int(word & 0xFFFFFF)
	if hlen > MaxHeaderSize {
		return nil, fmt.Errorf("header length %d exceeds the limit of %d bytes: %w", hlen, MaxHeaderSize, ErrHeaderTooLarge)
	}
	if hlen > len(frame)-4 {
		return nil, fmt.Errorf("header length %d exceeds frame of %d bytes: %w", hlen, len(frame), ErrBadFrame)
	}
	header := frame[4 : 4+hlen]
	var c *Command
	var err error
	switch st {
	case SerializeJSON:
		c, err = decodeJSONHeaderKeeping(header, keep)
	case SerializeRocketMQ:
		c, err = decodeBinaryHeaderKeeping(header, keep)
	default:
		return nil, fmt.Errorf("unknown serialize type %d: %w", st, ErrBadHeader)
	}
	if err != nil {
		return nil, err
	}
	c.SerializeType = st
	if body := frame[4+hlen:]; len(body) > 0 {
		c.Body = body
	}
	return c, nil
}

// jsonHeader mirrors the JSON header. Numbers are kept as json.Number and
// extFields as raw values so a Java peer's numbers or a Go peer's strings both
// decode.
type jsonHeader struct {
	Code      json.Number                `json:"code"`
	Language  json.RawMessage            `json:"language"`
	Version   json.Number                `json:"version"`
	Opaque    json.Number                `json:"opaque"`
	Flag      json.Number                `json:"flag"`
	Remark    *string                    `json:"remark"`
	ExtFields map[string]json.RawMessage `json:"extFields"`
}

func jsonInt32(n json.Number, field string) (int32, error) {
	if n == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("header field %s=%q: %w", field, n, ErrBadHeader)
	}
	return int32(v), nil
}

func decodeJSONHeader(b []byte) (*Command, error) {
	return decodeJSONHeaderKeeping(b, flatRule{})
}

func decodeJSONHeaderKeeping(b []byte, keep flatRule) (*Command, error) {
	// The fast parser bounds extFields itself (it hands a header with more to the general
	// decoder); the colon count, one vectorised pass, only sizes the map: colons inside strings
	// make it an overestimate, and it is capped.
	c, err := fastJSONHeaderKeeping(b, min(bytes.Count(b, colon), MaxExtFields+jsonTopFields), keep)
	if err != nil {
		// encoding/json would build a map of any size: count first, without allocating.
		if n := countFields(b, MaxExtFields+jsonTopFields); n > MaxExtFields+jsonTopFields {
			return nil, fmt.Errorf("json header has more than %d fields: %w", MaxExtFields+jsonTopFields, ErrHeaderTooLarge)
		}
		if c, err = slowJSONHeader(b); err != nil {
			return nil, err
		}
	}
	if len(c.ExtFields) > MaxExtFields { // the count above let a few more through, at most
		return nil, fmt.Errorf("json header has %d extFields, more than %d: %w", len(c.ExtFields), MaxExtFields, ErrHeaderTooLarge)
	}
	return c, nil
}

var colon = []byte{':'}

// slowJSONHeader decodes any JSON header encoding/json accepts, leniently.
func slowJSONHeader(b []byte) (*Command, error) {
	var h jsonHeader
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("json header: %v: %w", err, ErrBadHeader)
	}
	c := &Command{}
	var err error
	if c.Code, err = jsonInt32(h.Code, "code"); err != nil {
		return nil, err
	}
	if c.Version, err = jsonInt32(h.Version, "version"); err != nil {
		return nil, err
	}
	if c.Opaque, err = jsonInt32(h.Opaque, "opaque"); err != nil {
		return nil, err
	}
	if c.Flag, err = jsonInt32(h.Flag, "flag"); err != nil {
		return nil, err
	}
	if len(h.Language) > 0 {
		var s string
		if json.Unmarshal(h.Language, &s) == nil {
			c.Language = s
		} else if n, err := strconv.Atoi(string(h.Language)); err == nil && n >= 0 && n < 256 {
			c.Language = languageName(byte(n))
		}
	}
	if h.Remark != nil {
		c.Remark = *h.Remark
	}
	c.ExtFields = make(map[string]string, len(h.ExtFields))
	for k, raw := range h.ExtFields {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		if raw[0] == '"' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("extFields[%s]: %v: %w", k, err, ErrBadHeader)
			}
			c.ExtFields[k] = s
			continue
		}
		// Numbers and booleans from lenient peers: keep their text.
		c.ExtFields[k] = string(raw)
	}
	return c, nil
}

func encodeJSONHeader(b []byte, c *Command) []byte {
	b = append(b, `{"code":`...)
	b = strconv.AppendInt(b, int64(c.Code), 10)
	b = append(b, `,"language":`...)
	lang := c.Language
	if lang == "" {
		lang = ServerLanguage
	}
	b = appendJSONString(b, lang)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(c.Version), 10)
	b = append(b, `,"opaque":`...)
	b = strconv.AppendInt(b, int64(c.Opaque), 10)
	b = append(b, `,"flag":`...)
	b = strconv.AppendInt(b, int64(c.Flag), 10)
	if c.Remark != "" {
		b = append(b, `,"remark":`...)
		b = appendJSONString(b, c.Remark)
	}
	if c.extCount() > 0 {
		b = append(b, `,"extFields":{`...)
		first := true
		for k, v := range c.ExtSeq() {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, v)
		}
		b = append(b, '}')
	}
	b = append(b, `,"serializeTypeCurrentRPC":"JSON"}`...)
	return b
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Control characters (the message
// properties separators U+0001/U+0002 among them) are escaped as \u00XX;
// invalid UTF-8 becomes U+FFFD as encoding/json would.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func encodeBinaryHeader(b []byte, c *Command) ([]byte, error) {
	if c.Code < -1<<15 || c.Code > 1<<15-1 {
		return nil, fmt.Errorf("code %d does not fit the ROCKETMQ header: %w", c.Code, ErrBadHeader)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(int16(c.Code)))
	b = append(b, languageCode(c.Language))
	b = binary.BigEndian.AppendUint16(b, uint16(int16(c.Version)))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Opaque))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Flag))
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Remark)))
	b = append(b, c.Remark...)
	extLenAt := len(b)
	b = append(b, 0, 0, 0, 0)
	for k, v := range c.ExtSeq() {
		if k == "" || len(k) > 1<<15-1 {
			continue
		}
		b = binary.BigEndian.AppendUint16(b, uint16(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		b = append(b, v...)
	}
	binary.BigEndian.PutUint32(b[extLenAt:], uint32(len(b)-extLenAt-4))
	return b, nil
}

func decodeBinaryHeader(b []byte) (*Command, error) {
	return decodeBinaryHeaderKeeping(b, flatRule{})
}

// decodeBinaryHeaderKeeping decodes a ROCKETMQ binary header, keeping the extFields of the
// commands keep names flat (flatext.go) as the JSON decoder does. A flat command's keys and
// values are substrings of one copy of the extFields bytes: a header costs three allocations
// (command, list, string) whatever its field count.
func decodeBinaryHeaderKeeping(b []byte, keep flatRule) (*Command, error) {
	if len(b) < 21 {
		return nil, fmt.Errorf("binary header of %d bytes is shorter than 21: %w", len(b), ErrBadHeader)
	}
	c := &Command{
		Code:     int32(int16(binary.BigEndian.Uint16(b[0:]))),
		Language: languageName(b[2]),
		Version:  int32(int16(binary.BigEndian.Uint16(b[3:]))),
		Opaque:   int32(binary.BigEndian.Uint32(b[5:])),
		Flag:     int32(binary.BigEndian.Uint32(b[9:])),
	}
	p := 13
	rlen := int(binary.BigEndian.Uint32(b[p:]))
	p += 4
	if rlen < 0 || rlen > len(b)-p-4 {
		return nil, fmt.Errorf("remark length %d overruns the header: %w", rlen, ErrBadHeader)
	}
	if rlen > 0 {
		c.Remark = string(b[p : p+rlen])
	}
	p += rlen
	elen := int(binary.BigEndian.Uint32(b[p:]))
	p += 4
	if elen < 0 || elen > len(b)-p {
		return nil, fmt.Errorf("ext length %d overruns the header: %w", elen, ErrBadHeader)
	}
	ext := b[p : p+elen]
	flat := elen > 0 && keep.keeps(c)
	var whole string
	if flat {
		whole = string(ext)
		c.flatExt = make([]extField, 0, 16)
	} else {
		c.ExtFields = map[string]string{}
	}
	for i, fields := 0, 0; i < len(ext); fields++ {
		if fields >= MaxExtFields {
			return nil, fmt.Errorf("binary header has more than %d extFields: %w", MaxExtFields, ErrHeaderTooLarge)
		}
		if len(ext)-i < 2 {
			return nil, fmt.Errorf("truncated ext key length: %w", ErrBadHeader)
		}
		kl := int(binary.BigEndian.Uint16(ext[i:]))
		i += 2
		if kl > len(ext)-i-4 {
			return nil, fmt.Errorf("ext key length %d overruns the header: %w", kl, ErrBadHeader)
		}
		k0 := i
		i += kl
		vl := int(binary.BigEndian.Uint32(ext[i:]))
		i += 4
		if vl < 0 || vl > len(ext)-i {
			return nil, fmt.Errorf("ext value length %d overruns the header: %w", vl, ErrBadHeader)
		}
		if flat {
			c.flatExt = append(c.flatExt, extField{key: whole[k0 : k0+kl], value: whole[i : i+vl]})
		} else {
			c.ExtFields[string(ext[k0:k0+kl])] = string(ext[i : i+vl])
		}
		i += vl
	}
	return c, nil
}
