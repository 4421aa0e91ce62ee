package integration

// Self-tests of the harness's own decoders (no binaries involved): the raw frame codec, the
// stored-record parser and the offline store checker, against hand-built bytes.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFrameCodec round-trips a JSON request and decodes the binary example of §1.11.
func TestFrameCodec(t *testing.T) {
	f := encodeRequest(105, 1, map[string]string{"topic": "T1"}, []byte("body"))
	cmd, err := readFrame(bytes.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Code != 105 || cmd.Opaque != 1 || cmd.ExtFields["topic"] != "T1" || string(cmd.Body) != "body" {
		t.Errorf("decoded %+v", cmd)
	}

	bin, _ := hex.DecodeString("00000026" + "01000022" +
		"0069" + "09" + "013D" + "00000001" + "00000000" + "00000000" + "0000000D" +
		"0005" + hex.EncodeToString([]byte("topic")) + "00000002" + hex.EncodeToString([]byte("T1")))
	cmd, err = readFrame(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Code != 105 || cmd.Version != 317 || cmd.Opaque != 1 || cmd.ExtFields["topic"] != "T1" {
		t.Errorf("binary decoded %+v", cmd)
	}

	bad := frame(0, []byte(`{"code":0,"extFields":{"offset":5}}`), nil)
	if _, err := readFrame(bytes.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "must be strings") {
		t.Errorf("numeric extFields value accepted: %v", err)
	}
}

// testRecord is what encodeRecord writes.
type testRecord struct {
	topic  string
	queue  int32
	qoff   int64
	phy    int64
	body   string
	props  string
	v6Born bool
}

// encodeRecord builds a V1 commitlog record (§5.4).
func encodeRecord(r testRecord) []byte {
	var b bytes.Buffer
	w := func(v any) { _ = binary.Write(&b, binary.BigEndian, v) }
	sys := int32(0)
	bornHost := []byte{10, 0, 0, 1}
	if r.v6Born {
		sys |= 0x10
		bornHost = make([]byte, 16)
	}
	size := 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + (len(bornHost) + 4) + 8 + 8 + 4 + 8 + 4 + len(r.body) + 1 + len(r.topic) + 2 + len(r.props)
	w(int32(size))
	w(uint32(magicV1))
	w(bodyCRC([]byte(r.body)))
	w(r.queue)
	w(int32(0))
	w(r.qoff)
	w(r.phy)
	w(sys)
	w(int64(1700000000000))
	b.Write(bornHost)
	w(int32(5555))
	w(int64(1700000000001))
	b.Write([]byte{127, 0, 0, 1})
	w(int32(10911))
	w(int32(0))
	w(int64(0))
	w(int32(len(r.body)))
	b.WriteString(r.body)
	b.WriteByte(byte(len(r.topic)))
	b.WriteString(r.topic)
	w(int16(len(r.props)))
	b.WriteString(r.props)
	return b.Bytes()
}

// TestRecordParser decodes hand-built records, including an IPv6 born host, and refuses
// truncated and inconsistent ones without reading past the input.
func TestRecordParser(t *testing.T) {
	a := encodeRecord(testRecord{topic: "T", queue: 2, qoff: 7, phy: 0, body: "hello", props: props("TAGS", "TagA", "KEYS", "k1 k2")})
	b := encodeRecord(testRecord{topic: "T", queue: 1, qoff: 0, phy: int64(len(a)), body: "x", v6Born: true})
	recs, err := parseRecords(append(append([]byte{}, a...), b...))
	if err != nil || len(recs) != 2 {
		t.Fatalf("parse: %d records, %v", len(recs), err)
	}
	r := recs[0]
	if r.Topic != "T" || r.QueueID != 2 || r.QueueOffset != 7 || string(r.Body) != "hello" ||
		r.Properties["TAGS"] != "TagA" || r.Properties["KEYS"] != "k1 k2" || r.StoreHost != "127.0.0.1:10911" || r.BodyCRC != bodyCRC(r.Body) {
		t.Errorf("record 0: %+v", r)
	}
	if recs[1].PhysicalOffset != int64(len(a)) || string(recs[1].Body) != "x" || recs[1].StoreHost != "127.0.0.1:10911" {
		t.Errorf("record 1 (IPv6 born host): %+v", recs[1])
	}
	for n := range len(a) {
		if _, err := parseRecord(a[:n]); err == nil {
			t.Fatalf("truncated record of %d/%d bytes accepted", n, len(a))
		}
	}
	bad := append([]byte{}, a...)
	binary.BigEndian.PutUint32(bad, uint32(len(a)-1))
	if _, err := parseRecord(bad); err == nil {
		t.Errorf("record with a wrong TOTALSIZE accepted")
	}
	if javaHash("TagA") != 2598919 || javaHash("") != 0 || javaHash("hello world") != 1794106052 {
		t.Errorf("javaHash: %d %d %d", javaHash("TagA"), javaHash(""), javaHash("hello world"))
	}
}

// TestStoreChecker builds a small store by hand (two commitlog files with a blank marker at
// the roll, two queues, consume queues over two files) and checks that checkStore accepts it
// and reports a wrong consume-queue unit and a record missing from the consume queue.
func TestStoreChecker(t *testing.T) {
	const seg = 640
	root := t.TempDir()
	topic := "T"
	files := [][]byte{make([]byte, seg), make([]byte, seg)}
	cq := map[int][]byte{}
	next := map[int32]int64{}
	fileIdx, pos := 0, 0
	for i := range 8 {
		q := int32(i % 2)
		body := fmt.Sprintf("message-%d-%s", i, strings.Repeat("p", 20))
		rec := encodeRecord(testRecord{topic: topic, queue: q, qoff: next[q], phy: int64(fileIdx*seg + pos), body: body, props: props("TAGS", "TagK")})
		if pos+len(rec)+8 > seg {
			binary.BigEndian.PutUint32(files[fileIdx][pos:], uint32(seg-pos))
			binary.BigEndian.PutUint32(files[fileIdx][pos+4:], magicBlank)
			fileIdx, pos = fileIdx+1, 0
			rec = encodeRecord(testRecord{topic: topic, queue: q, qoff: next[q], phy: int64(fileIdx * seg), body: body, props: props("TAGS", "TagK")})
		}
		copy(files[fileIdx][pos:], rec)
		unit := make([]byte, 20)
		binary.BigEndian.PutUint64(unit, uint64(fileIdx*seg+pos))
		binary.BigEndian.PutUint32(unit[8:], uint32(len(rec)))
		binary.BigEndian.PutUint64(unit[12:], uint64(int64(javaHash("TagK"))))
		cq[int(q)] = append(cq[int(q)], unit...)
		next[q]++
		pos += len(rec)
	}
	if fileIdx != 1 {
		t.Fatalf("test store did not roll to a second commitlog file")
	}
	write := func(path string, data []byte) {
		_ = os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range files {
		write(filepath.Join(root, "commitlog", fmt.Sprintf("%020d", i*seg)), f)
	}
	writeCQ := func() {
		for q, data := range cq {
			// 3 units per file, files preallocated with zeros
			for start := 0; start < len(data); start += 60 {
				f := make([]byte, 60)
				copy(f, data[start:])
				write(filepath.Join(root, "consumequeue", topic, fmt.Sprint(q), fmt.Sprintf("%020d", start)), f)
			}
		}
	}
	writeCQ()
	counts, problems := checkStore(root, topic)
	if len(problems) > 0 || counts[0] != 4 || counts[1] != 4 {
		t.Fatalf("valid store: counts %v, problems %q", counts, problems)
	}

	// Point queue 1 unit 2 at queue 0's record, and drop queue 0's last unit.
	copy(cq[1][40:48], cq[0][40:48])
	cq[0] = cq[0][:60]
	os.RemoveAll(filepath.Join(root, "consumequeue"))
	writeCQ()
	_, problems = checkStore(root, topic)
	joined := strings.Join(problems, "\n")
	if !strings.Contains(joined, "queue 1 unit 2") || !strings.Contains(joined, "is not in the consume queue") {
		t.Errorf("corrupt store: problems %q", problems)
	}
}
