package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBadInput (j): malformed or hostile input over raw TCP, against the broker and the name
// server. After every case the server must still answer a normal request on a new connection
// (broker: a SEND_MESSAGE to a valid topic succeeds; name server: the route of TBW102 is
// served) and the process must still be running.
//
// Framing errors (a length over the 16 MiB frame limit, a header that is not JSON, a header
// length past the frame end, a zero length, a bad binary header) must make the server close
// the connection or answer with an error code within 5 s; it must not wait for the 16 MiB,
// crash or answer success. An unknown request code must be answered with code 3
// (REQUEST_CODE_NOT_SUPPORTED) on the same connection. Broker only: a send to an invalid topic
// name must get an error code; a body over maxMessageSize (set to 4096 here) and a properties
// string over 32767 bytes must get 13 (MESSAGE_ILLEGAL).
func TestBadInput(t *testing.T) {
	t.Parallel()
	c := startCluster(t, withFlag("maxMessageSize", "4096"))

	servers := []struct {
		name   string
		addr   string
		proc   *proc
		health func() error
	}{
		{"broker", c.b.addr, c.b.proc, func() error {
			resp, err := sendRaw(c.b.addr, "HealthCheckTopic", 0, []byte("ok"), props("TAGS", "H"))
			if err != nil {
				return err
			}
			if resp.Code != respSuccess {
				return fmt.Errorf("normal send answered code %d %q", resp.Code, resp.Remark)
			}
			return nil
		}},
		{"namesrv", c.ns.addr, c.ns.proc, func() error {
			resp, err := rawRequest(c.ns.addr, codeGetRouteInfo, map[string]string{"topic": "TBW102"}, nil, 5*time.Second)
			if err != nil {
				return err
			}
			if resp.Code != respSuccess {
				return fmt.Errorf("route of TBW102 answered code %d %q", resp.Code, resp.Remark)
			}
			return nil
		}},
	}

	framing := []struct {
		name  string
		bytes func() []byte
		close bool // we close right after writing; nothing to expect on this connection
	}{
		{"length over 16 MiB", func() []byte {
			b := make([]byte, 8, 8+64)
			binary.BigEndian.PutUint32(b, 17<<20)
			binary.BigEndian.PutUint32(b[4:], 32)
			return append(b, []byte(`{"code":105,"opaque":1,"flag":0}`)...)
		}, false},
		{"truncated frame then close", func() []byte {
			full := encodeRequest(codeGetRouteInfo, 1, map[string]string{"topic": "TBW102"}, nil)
			return full[:len(full)/2]
		}, true},
		{"header not JSON", func() []byte { return frame(0, []byte(`{"code":105,"opaque":7,this is not json`), nil) }, false},
		{"header length past frame end", func() []byte {
			b := make([]byte, 12)
			binary.BigEndian.PutUint32(b, 8)
			binary.BigEndian.PutUint32(b[4:], 1000) // JSON, header length 1000 in an 8-byte frame
			copy(b[8:], "{}{}")
			return b
		}, false},
		{"zero length", func() []byte { return make([]byte, 4) }, false},
		{"binary header with bad remark length", func() []byte {
			h := make([]byte, 21)
			binary.BigEndian.PutUint16(h, 105)
			binary.BigEndian.PutUint32(h[13:], 0x7FFFFFF0) // remark length far past the header
			return frame(1, h, nil)
		}, false},
	}

	for _, s := range servers {
		check := func(t *testing.T) {
			t.Helper()
			if err := s.proc.exited(); err != nil {
				t.Fatalf("%s died: %v", s.name, err)
			}
			eventually(t, 10*time.Second, s.name+" answers a normal request on a new connection", s.health)
		}
		t.Run(s.name, func(t *testing.T) {
			check(t) // baseline
			for _, f := range framing {
				t.Run(strings.ReplaceAll(f.name, " ", "_"), func(t *testing.T) {
					conn, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Close()
					if _, err := conn.Write(f.bytes()); err != nil && !f.close {
						t.Fatalf("write: %v", err)
					}
					if f.close {
						conn.Close()
					} else {
						closed, resp, err := closedOrAnswer(conn, 5*time.Second)
						switch {
						case err != nil:
							t.Errorf("%s: %v", f.name, err)
						case !closed && resp.Code == respSuccess:
							t.Errorf("%s: answered SUCCESS to malformed input: %+v", f.name, resp)
						case !closed:
							t.Logf("%s: answered code %d %q", f.name, resp.Code, resp.Remark)
						}
					}
					check(t)
				})
			}
			t.Run("unknown_request_code", func(t *testing.T) {
				resp, err := rawRequest(s.addr, 9999, map[string]string{"x": "y"}, nil, 5*time.Second)
				if err != nil {
					t.Fatalf("unknown code: %v", err)
				}
				if resp.Code != respNotSupported {
					t.Errorf("unknown code 9999 answered code %d %q, want %d REQUEST_CODE_NOT_SUPPORTED", resp.Code, resp.Remark, respNotSupported)
				}
				check(t)
			})
		})
	}

	sends := []struct {
		name     string
		topic    string
		body     []byte
		props    string
		wantCode int // -1: any error code
	}{
		{"invalid topic name", "bad topic!", []byte("x"), "", -1},
		{"topic name over 127 characters", strings.Repeat("t", 200), []byte("x"), "", -1},
		{"body over maxMessageSize", "BadInputTopic", make([]byte, 8192), "", respMessageIllegal},
		{"properties over 32767 bytes", "BadInputTopic", []byte("x"), props("KEYS", strings.Repeat("k", 40000)), respMessageIllegal},
	}
	t.Run("broker_send", func(t *testing.T) {
		for _, sc := range sends {
			t.Run(strings.ReplaceAll(sc.name, " ", "_"), func(t *testing.T) {
				resp, err := sendRaw(c.b.addr, sc.topic, 0, sc.body, sc.props)
				if err != nil {
					t.Fatalf("%s: %v", sc.name, err)
				}
				switch {
				case sc.wantCode < 0 && resp.Code == respSuccess:
					t.Errorf("%s: answered SUCCESS, want an error code", sc.name)
				case sc.wantCode >= 0 && resp.Code != sc.wantCode:
					t.Errorf("%s: answered code %d %q, want %d", sc.name, resp.Code, resp.Remark, sc.wantCode)
				default:
					t.Logf("%s: code %d %q", sc.name, resp.Code, resp.Remark)
				}
				if err := c.b.exited(); err != nil {
					t.Fatalf("broker died: %v", err)
				}
				eventually(t, 10*time.Second, "broker answers a normal send", servers[0].health)
			})
		}
	})
}

// closedOrAnswer waits up to d for the server to close conn (closed=true) or to send a
// frame (resp). It is an error if neither happens, or if what arrives is not a frame.
func closedOrAnswer(conn net.Conn, d time.Duration) (closed bool, resp *remotingCmd, err error) {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	resp, err = readFrame(conn)
	if err == nil {
		return false, resp, nil
	}
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true, nil, nil
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil, fmt.Errorf("server neither answered nor closed the connection within %v", d)
	}
	return false, nil, fmt.Errorf("reading the reply: %w", err)
}
