package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// FastjsonEncoder is implemented by bodies whose wire form is not standard JSON (maps keyed by
// MessageQueue objects, §4.1). Encode prefers it over encoding/json.
type FastjsonEncoder interface {
	EncodeFastjson() ([]byte, error)
}

// ErrMalformedJSON is returned by Normalize and Decode for text that is not JSON even under
// fastjson's lenient rules.
var ErrMalformedJSON = errors.New("protocol: malformed JSON")

// Encode returns the compact wire form of v: standard JSON without whitespace and without HTML
// escaping, or the fastjson form when v implements FastjsonEncoder.
func Encode(v any) ([]byte, error) {
	if fe, ok := v.(FastjsonEncoder); ok {
		return fe.EncodeFastjson()
	}
	return marshalCompact(v)
}

// MustEncode is Encode for values that cannot fail to encode (plain structs of strings, numbers
// and maps); it panics on error and exists to keep handler code short.
func MustEncode(v any) []byte {
	b, err := Encode(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Decode parses a body produced by either a Go peer (standard JSON) or a Java peer (fastjson,
// possibly with unquoted numeric keys or object keys) into v.
func Decode(data []byte, v any) error {
	norm, err := Normalize(data)
	if err != nil {
		return err
	}
	return json.Unmarshal(norm, v)
}

func marshalCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// Normalize rewrites fastjson's non-standard object keys into JSON strings so that encoding/json
// can parse the result: a bare key such as 0 or -1 becomes "0" / "-1", and an object or array
// literal used as a key becomes a string holding its (recursively normalized) text. Valid JSON is
// returned unchanged. String contents are never altered.
func Normalize(data []byte) ([]byte, error) { return normalize(data, 0) }

// maxKeyNesting bounds object literals used as keys inside keys (MessageQueue keys need 1), so
// hostile input cannot make normalization quadratic.
const maxKeyNesting = 4

func normalize(data []byte, depth int) ([]byte, error) {
	if depth > maxKeyNesting {
		return nil, fmt.Errorf("%w: object keys nested too deeply", ErrMalformedJSON)
	}
	if json.Valid(data) {
		return data, nil
	}
	out := make([]byte, 0, len(data)+32)
	var stack []byte // 'o' object, 'a' array
	expectKey := false
	for i := 0; i < len(data); {
		c := data[i]
		if isJSONSpace(c) {
			out = append(out, c)
			i++
			continue
		}
		if expectKey && c != '"' && c != '}' {
			end, err := keyTokenEnd(data, i)
			if err != nil {
				return nil, err
			}
			tok := bytes.TrimSpace(data[i:end])
			if tok[0] == '{' || tok[0] == '[' {
				if tok, err = normalize(tok, depth+1); err != nil {
					return nil, err
				}
			}
			q, _ := json.Marshal(string(tok))
			out = append(out, q...)
			i = end
			expectKey = false
			continue
		}
		switch c {
		case '"':
			end, err := stringEnd(data, i)
			if err != nil {
				return nil, err
			}
			out = append(out, data[i:end]...)
			i = end
			expectKey = false
			continue
		case '{':
			stack = append(stack, 'o')
			expectKey = true
		case '[':
			stack = append(stack, 'a')
			expectKey = false
		case '}', ']':
			if len(stack) == 0 {
				return nil, fmt.Errorf("%w: unbalanced %q at offset %d", ErrMalformedJSON, c, i)
			}
			stack = stack[:len(stack)-1]
			expectKey = false
		case ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1] == 'o'
		default:
			expectKey = false
		}
		out = append(out, c)
		i++
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("%w: unterminated container", ErrMalformedJSON)
	}
	return out, nil
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// stringEnd returns the index just past the string literal starting at data[i] == '"'.
func stringEnd(data []byte, i int) (int, error) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: unterminated string at offset %d", ErrMalformedJSON, i)
}

// keyTokenEnd returns the end of a non-string object key starting at data[i]: the matching
// bracket for an object/array literal, otherwise the position of the ':' that follows it.
func keyTokenEnd(data []byte, i int) (int, error) {
	if data[i] == '{' || data[i] == '[' {
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, err := stringEnd(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("%w: unterminated key at offset %d", ErrMalformedJSON, i)
	}
	for j := i; j < len(data); j++ {
		switch data[j] {
		case ':':
			if j == i {
				return 0, fmt.Errorf("%w: empty key at offset %d", ErrMalformedJSON, i)
			}
			return j, nil
		case ',', '{', '}', '[', ']', '"':
			return 0, fmt.Errorf("%w: bad key at offset %d", ErrMalformedJSON, i)
		}
	}
	return 0, fmt.Errorf("%w: key without value at offset %d", ErrMalformedJSON, i)
}
