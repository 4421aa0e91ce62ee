package ha

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Sizes of the two messages of the protocol.
const (
	// HeaderSize is the size of a master-to-slave frame header (offset 8, size 4).
	HeaderSize = 12
	// ReportSize is the size of a slave-to-master offset report.
	ReportSize = 8
)

// Errors a peer's bytes can cause; each closes that peer's connection only.
var (
	// ErrMalformed: a frame header or report that no correct peer sends (negative offset or
	// size, a body larger than allowed).
	ErrMalformed = errors.New("ha: malformed frame")
	// ErrOffsetMismatch: a frame does not start where the slave expects the next byte.
	ErrOffsetMismatch = errors.New("ha: offset mismatch")
	// ErrCorrupt: the streamed bytes are not commitlog records where a record must start.
	ErrCorrupt = errors.New("ha: streamed bytes are not commitlog records")
)

// Header is one frame header: Size body bytes of the master's commitlog starting at Offset.
type Header struct {
	Offset int64
	Size   int32
}

// AppendHeader appends the 12-byte encoding of h to dst.
func AppendHeader(dst []byte, h Header) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.Offset))
	return binary.BigEndian.AppendUint32(dst, uint32(h.Size))
}

// ParseHeader decodes a 12-byte header and checks it: offset and size not negative, size at
// most maxBody (a peer cannot make the reader allocate more than it allows).
func ParseHeader(b []byte, maxBody int) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: header of %d bytes, want %d", ErrMalformed, len(b), HeaderSize)
	}
	h := Header{Offset: int64(binary.BigEndian.Uint64(b)), Size: int32(binary.BigEndian.Uint32(b[8:]))}
	switch {
	case h.Offset < 0:
		return h, fmt.Errorf("%w: negative offset %d", ErrMalformed, h.Offset)
	case h.Size < 0:
		return h, fmt.Errorf("%w: negative body size %d", ErrMalformed, h.Size)
	case int64(h.Size) > int64(maxBody):
		return h, fmt.Errorf("%w: body size %d exceeds the limit %d", ErrMalformed, h.Size, maxBody)
	case h.Offset > maxOffset-int64(h.Size):
		return h, fmt.Errorf("%w: offset %d + size %d overflows", ErrMalformed, h.Offset, h.Size)
	}
	return h, nil
}

// maxOffset is the largest commitlog offset the protocol can carry.
const maxOffset = int64(^uint64(0) >> 1)

// ReadFrame reads one frame from r. The body is read into buf when it is large enough (else a
// new slice); the returned body is only valid until the next call with the same buf.
func ReadFrame(r io.Reader, buf []byte, maxBody int) (Header, []byte, error) {
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return Header{}, nil, err
	}
	h, err := ParseHeader(hb[:], maxBody)
	if err != nil {
		return h, nil, err
	}
	if cap(buf) < int(h.Size) {
		buf = make([]byte, h.Size)
	}
	body := buf[:h.Size]
	if _, err := io.ReadFull(r, body); err != nil {
		return h, nil, fmt.Errorf("read %d-byte frame body at %d: %w", h.Size, h.Offset, noEOF(err))
	}
	return h, body, nil
}

// noEOF turns a clean EOF inside a frame into ErrUnexpectedEOF: the peer stopped mid-frame.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendReport appends the 8-byte encoding of a slave's max offset to dst.
func AppendReport(dst []byte, offset int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(offset))
}

// ParseReport decodes an 8-byte report; a negative offset is ErrMalformed.
func ParseReport(b []byte) (int64, error) {
	if len(b) < ReportSize {
		return 0, fmt.Errorf("%w: report of %d bytes, want %d", ErrMalformed, len(b), ReportSize)
	}
	off := int64(binary.BigEndian.Uint64(b))
	if off < 0 {
		return 0, fmt.Errorf("%w: negative reported offset %d", ErrMalformed, off)
	}
	return off, nil
}

// Frame is one decoded frame (DecodeFrames).
type Frame struct {
	Header
	Body []byte
}

// DecodeFrames decodes the complete frames at the start of b (the stream decoder the fuzz
// target exercises; ReadFrame is its io.Reader form). It returns them (bodies alias b), the
// number of bytes they take, and the error of the first malformed header, after which nothing
// is decoded. An incomplete frame at the end is left undecoded without error.
func DecodeFrames(b []byte, maxBody int) ([]Frame, int, error) {
	var out []Frame
	pos := 0
	for len(b)-pos >= HeaderSize {
		h, err := ParseHeader(b[pos:], maxBody)
		if err != nil {
			return out, pos, err
		}
		end := pos + HeaderSize + int(h.Size)
		if end > len(b) {
			break
		}
		out = append(out, Frame{Header: h, Body: b[pos+HeaderSize : end : end]})
		pos = end
	}
	return out, pos, nil
}
