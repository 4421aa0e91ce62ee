package ha

import (
	"bytes"
	"errors"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	b := AppendHeader(nil, Header{Offset: 1 << 40, Size: 32 << 10})
	if len(b) != HeaderSize {
		t.Fatalf("header is %d bytes", len(b))
	}
	h, err := ParseHeader(b, 32<<10)
	if err != nil || h.Offset != 1<<40 || h.Size != 32<<10 {
		t.Fatalf("got %+v %v", h, err)
	}
	if _, err := ParseHeader(b, 32<<10-1); !errors.Is(err, ErrMalformed) {
		t.Fatalf("oversized body accepted: %v", err)
	}
	neg := AppendHeader(nil, Header{Offset: -1})
	if _, err := ParseHeader(neg, 10); !errors.Is(err, ErrMalformed) {
		t.Fatalf("negative offset accepted: %v", err)
	}
	if off, err := ParseReport(AppendReport(nil, 12345)); err != nil || off != 12345 {
		t.Fatalf("report: %d %v", off, err)
	}
	if _, err := ParseReport(AppendReport(nil, -5)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("negative report accepted: %v", err)
	}
}

func TestReadFrame(t *testing.T) {
	var stream []byte
	stream = append(AppendHeader(stream, Header{Offset: 100, Size: 3}), 'a', 'b', 'c')
	stream = AppendHeader(stream, Header{Offset: 103})
	r := bytes.NewReader(stream)
	h, body, err := ReadFrame(r, nil, 16)
	if err != nil || h.Offset != 100 || string(body) != "abc" {
		t.Fatalf("first frame %+v %q %v", h, body, err)
	}
	h, body, err = ReadFrame(r, nil, 16)
	if err != nil || h.Offset != 103 || len(body) != 0 {
		t.Fatalf("heartbeat %+v %q %v", h, body, err)
	}
	// A body cut short is an unexpected EOF, not a clean end.
	cut := append(AppendHeader(nil, Header{Offset: 0, Size: 10}), 1, 2)
	if _, _, err := ReadFrame(bytes.NewReader(cut), nil, 16); err == nil {
		t.Fatal("truncated body accepted")
	}
}

// FuzzDecodeFrames: the stream decoder never panics, decodes only frames within its input and
// within the body limit, re-encoding the decoded frames gives back exactly the bytes it consumed,
// and decoding that prefix again gives the same frames.
func FuzzDecodeFrames(f *testing.F) {
	ok := append(AppendHeader(nil, Header{Offset: 4096, Size: 4}), 1, 2, 3, 4)
	f.Add(ok)
	f.Add(AppendHeader(nil, Header{Offset: 7}))
	f.Add(append(ok, AppendHeader(nil, Header{Offset: 4100, Size: 1 << 30})...))
	f.Add(AppendHeader(nil, Header{Offset: -1, Size: 1}))
	f.Add(AppendHeader(nil, Header{Offset: 1<<63 - 2, Size: 100}))
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		const maxBody = 64
		frames, n, err := DecodeFrames(b, maxBody)
		if n < 0 || n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		var re []byte
		for _, fr := range frames {
			if fr.Offset < 0 || fr.Size < 0 || fr.Size > maxBody || int(fr.Size) != len(fr.Body) {
				t.Fatalf("bad frame %+v (%d body bytes)", fr.Header, len(fr.Body))
			}
			re = append(AppendHeader(re, fr.Header), fr.Body...)
		}
		if !bytes.Equal(re, b[:n]) {
			t.Fatalf("re-encoding gives %x, consumed %x", re, b[:n])
		}
		again, n2, err2 := DecodeFrames(b[:n], maxBody)
		if err2 != nil || n2 != n || len(again) != len(frames) {
			t.Fatalf("prefix decodes to %d frames/%d bytes/%v, want %d/%d", len(again), n2, err2, len(frames), n)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v is not ErrMalformed", err)
		}
		// The reader form agrees with the slice form.
		r := bytes.NewReader(b)
		for i := range frames {
			h, body, rerr := ReadFrame(r, nil, maxBody)
			if rerr != nil || h != frames[i].Header || !bytes.Equal(body, frames[i].Body) {
				t.Fatalf("ReadFrame %d: %+v %v, want %+v", i, h, rerr, frames[i].Header)
			}
		}
	})
}
