package dledger

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
)

// encodedAppend is an AppendEntries request with one entry of size bytes, encoded as a peer's
// NetworkTransport encodes it.
func encodedAppend(tb testing.TB, size int) ([]byte, []byte) {
	tb.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("n0"), Addr: []byte("127.0.0.1:1")},
		Term:      3, PrevLogEntry: 10, PrevLogTerm: 3, LeaderCommitIndex: 10,
		Entries: []*raft.Log{{Index: 11, Term: 3, Type: raft.LogCommand, Data: data}},
	}
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, &codec.MsgpackHandle{}).Encode(req); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), data
}

// TestInboundDecodesLargeEntries: entries below, at and above the decoder's initial allocation
// bound come out whole.
func TestInboundDecodesLargeEntries(t *testing.T) {
	for _, size := range []int{1, 300 << 10, inboundMaxInitLen, inboundMaxInitLen + 12345} {
		frame, data := encodedAppend(t, size)
		var got raft.AppendEntriesRequest
		if err := newInboundDecoder(bytes.NewReader(frame)).Decode(&got); err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		if len(got.Entries) != 1 || !bytes.Equal(got.Entries[0].Data, data) || got.Entries[0].Index != 11 || got.LeaderCommitIndex != 10 {
			t.Fatalf("%d bytes: decoded request differs", size)
		}
	}
}

// TestInboundRefusesTruncatedEntry: a frame claiming more data than it carries fails to decode
// (the connection closes) instead of waiting or returning a short entry.
func TestInboundRefusesTruncatedEntry(t *testing.T) {
	frame, _ := encodedAppend(t, 1<<20)
	var got raft.AppendEntriesRequest
	if err := newInboundDecoder(bytes.NewReader(frame[:len(frame)/2])).Decode(&got); err == nil {
		t.Fatal("a truncated AppendEntries decoded without error")
	}
}

// BenchmarkInboundDecode decodes one AppendEntries with an entry of each size with the decoder
// of inbound connections and with the library's defaults (what the inbound decoder used before).
func BenchmarkInboundDecode(b *testing.B) {
	for _, size := range []int{64 << 10, 360 << 10, 4 << 20} {
		frame, _ := encodedAppend(b, size)
		for _, dec := range []struct {
			name string
			new  func(r *bytes.Reader) *codec.Decoder
		}{
			{"inbound", func(r *bytes.Reader) *codec.Decoder { return newInboundDecoder(r) }},
			{"library-default", func(r *bytes.Reader) *codec.Decoder { return codec.NewDecoder(r, &codec.MsgpackHandle{}) }},
		} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, dec.name), func(b *testing.B) {
				b.SetBytes(int64(size))
				b.ReportAllocs()
				r := bytes.NewReader(frame)
				for b.Loop() {
					r.Reset(frame)
					var got raft.AppendEntriesRequest
					if err := dec.new(r).Decode(&got); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
