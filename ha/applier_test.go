package ha

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"rocketraft/message"
)

// fakeTarget mimics storage.Store.AppendRaw's contract: appends at the end only, whole
// records within one file, a blank marker moves the end to the next file.
type fakeTarget struct {
	fileSize int64
	end      int64
	data     map[int64][]byte // file start -> bytes
	calls    int
}

func newFakeTarget(fileSize int64) *fakeTarget {
	return &fakeTarget{fileSize: fileSize, data: map[int64][]byte{}}
}

func (f *fakeTarget) CommitLogMaxOffset() int64 { return f.end }

func (f *fakeTarget) AppendRaw(off int64, b []byte) error {
	f.calls++
	if off != f.end {
		return fmt.Errorf("append at %d, end %d", off, f.end)
	}
	in := off % f.fileSize
	if in+int64(len(b)) > f.fileSize {
		return fmt.Errorf("crosses a file")
	}
	start := off - in
	f.data[start] = append(f.data[start], b...)
	f.end += int64(len(b))
	if len(b) >= 8 {
		tail := b[len(b)-8:]
		if binary.BigEndian.Uint32(tail[4:]) == message.BlankMagicCode {
			f.end = start + f.fileSize
		}
	}
	return nil
}

// record builds a fake record of n bytes: size, V1 magic, filler.
func record(n int, fill byte) []byte {
	b := bytes.Repeat([]byte{fill}, n)
	binary.BigEndian.PutUint32(b, uint32(n))
	binary.BigEndian.PutUint32(b[4:], message.MagicCodeV1)
	return b
}

func blank(n int64) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b, uint32(n))
	binary.BigEndian.PutUint32(b[4:], message.BlankMagicCode)
	return b
}

// masterLog builds a commitlog of fileSize files: records of the given sizes, each file closed
// by a blank marker when the next record does not fit.
func masterLog(fileSize int64, sizes []int) []byte {
	var out []byte
	for i, n := range sizes {
		in := int64(len(out)) % fileSize
		if in+int64(n)+8 > fileSize {
			out = append(out, blank(fileSize-in)...)
		}
		out = append(out, record(n, byte(i))...)
	}
	return out
}

// TestApplierChunks feeds a master log cut at every chunk size: the target ends up with the
// same bytes (up to each file's blank marker), appended only in whole records.
func TestApplierChunks(t *testing.T) {
	const fs = 1024
	sizes := []int{100, 300, 91, 500, 200, 200, 600, 91, 91, 400, 700, 120}
	log := masterLog(fs, sizes)
	for _, chunk := range []int{1, 7, 8, 13, 91, 100, 333, 1024, 5000} {
		tg := newFakeTarget(fs)
		ap := newApplier(tg, fs, 1<<20)
		for off := 0; off < len(log); {
			// never across a file, as the master's ReadCommitLog
			n := min(chunk, len(log)-off, fs-off%fs)
			if _, err := ap.feed(int64(off), log[off:off+n]); err != nil {
				t.Fatalf("chunk %d at %d: %v", chunk, off, err)
			}
			off += n
		}
		if tg.end != int64(len(log)) || ap.pending() != 0 {
			t.Fatalf("chunk %d: end %d pending %d, want %d", chunk, tg.end, ap.pending(), len(log))
		}
		for start, got := range tg.data {
			want := log[start : start+int64(len(got))]
			if !bytes.Equal(got, want) {
				t.Fatalf("chunk %d: file %d differs", chunk, start)
			}
		}
	}
}

func TestApplierRejects(t *testing.T) {
	const fs = 1024
	tg := newFakeTarget(fs)
	ap := newApplier(tg, fs, 1<<20)
	if _, err := ap.feed(8, record(100, 1)); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	ap = newApplier(tg, fs, 1<<20)
	if _, err := ap.feed(0, bytes.Repeat([]byte{0xee}, 16)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("garbage: %v", err)
	}
	ap = newApplier(tg, fs, 1<<20)
	if _, err := ap.feed(0, blank(512)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short blank: %v", err)
	}
	ap = newApplier(tg, fs, 1<<20)
	if _, err := ap.feed(0, record(2000, 1)[:64]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("record larger than the file: %v", err)
	}
	if tg.end != 0 {
		t.Fatalf("something was appended: %d", tg.end)
	}
}

// FuzzApplier feeds arbitrary frames to a slave's applier: it never panics, only ever appends
// at the target's end within one file, and every error is one of the package's sentinels (or
// the target's).
func FuzzApplier(f *testing.F) {
	const fs = 1024
	good := masterLog(fs, []int{100, 300, 500, 200})
	var stream []byte
	for off := 0; off < len(good); off += 100 {
		n := min(100, len(good)-off, fs-off%fs)
		stream = append(AppendHeader(stream, Header{Offset: int64(off), Size: int32(n)}), good[off:off+n]...)
	}
	f.Add(stream)
	f.Add(append(AppendHeader(nil, Header{Offset: 0, Size: 8}), blank(fs)[:8]...))
	f.Add(append(AppendHeader(nil, Header{Offset: 5, Size: 3}), 1, 2, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		frames, _, _ := DecodeFrames(b, 4096)
		tg := newFakeTarget(fs)
		ap := newApplier(tg, fs, 4096)
		for _, fr := range frames {
			before := tg.end
			n, err := ap.feed(fr.Offset, fr.Body)
			if n < 0 || tg.end < before {
				t.Fatalf("appended %d, end %d -> %d", n, before, tg.end)
			}
			if err != nil {
				if !errors.Is(err, ErrOffsetMismatch) && !errors.Is(err, ErrCorrupt) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
		}
	})
}
