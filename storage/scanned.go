package storage

import (
	"bytes"

	"rocketraft/message"
)

// Scanned is one record's properties as the code that encoded the record already read them, so
// the append need not read them a second time: Known is message.ReadKnown(Props). The broker's
// send path reads a send's properties once to classify it (broker/sendplan.go) and hands that
// read to the store with the record (AppendScanned; in DLedger mode through the leader's own
// apply, fsm.LeaderScans).
//
// A Scanned is only a shortcut, never a source of truth: the append uses it for a record whose
// properties it describes (describes: the same bytes, or those followed by one CLUSTER pair),
// and reads the record itself otherwise, so a stale or misplaced Scanned costs a scan, never a
// wrong tags code, index key or WAIT decision.
type Scanned struct {
	// Props is the properties string Known was read from.
	Props string
	// Known is message.ReadKnown(Props); nil: nothing was read (the store reads the record).
	Known *message.Known[string]
}

// clusterPair is how a stamped CLUSTER pair starts.
const clusterPair = message.PropertyCluster + string(message.NameValueSeparator)

// describes reports whether sc's read holds for a record whose properties are props: props is
// sc.Props, or sc.Props followed by a single CLUSTER pair (as the broker stamps its cluster
// name after reading a send, broker/send.go). CLUSTER is none of the keys the store reads, and
// a pair appended after a complete last pair (a separator is added when the read string lacks
// one) changes no earlier pair, so the store reads the same tags, keys, UNIQ_KEY and WAIT from
// props as from sc.Props. The check is a comparison of bytes, far cheaper than a scan.
func (sc *Scanned) describes(props []byte) bool {
	n := len(sc.Props)
	if sc.Known == nil || len(props) < n || string(props[:n]) != sc.Props {
		return false
	}
	rest := props[n:]
	if len(rest) == 0 {
		return true
	}
	if n > 0 && sc.Props[n-1] != message.PropertySeparator {
		if rest[0] != message.PropertySeparator {
			return false // the read string's last pair would continue into rest
		}
		rest = rest[1:]
	}
	if !bytes.HasPrefix(rest, []byte(clusterPair)) {
		return false
	}
	// exactly one pair: its value runs to the one separator, which ends props
	return bytes.IndexByte(rest, message.PropertySeparator) == len(rest)-1
}

// scannedAt is scans[i] when the caller read record i, else nil.
func scannedAt(scans []Scanned, i int) *Scanned {
	if i < len(scans) && scans[i].Known != nil {
		return &scans[i]
	}
	return nil
}
