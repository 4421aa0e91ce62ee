package broker

import (
	"os"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"rocketraft/remoting"
)

// TestHandlerTable: every entry of the request table has a handler, the sends are the only
// inline codes, and the offset commit and query keep their per-connection order.
func TestHandlerTable(t *testing.T) {
	b := &Broker{}
	table := b.handlers()
	for code, r := range table {
		if r.handle == nil {
			t.Errorf("code %d has no handler", code)
		}
		isSend := code == remoting.SendMessage || code == remoting.SendMessageV2 || code == remoting.SendBatchMessage
		if (r.how == inlineSend) != isSend {
			t.Errorf("code %d: dispatch %d", code, r.how)
		}
		if r.flat != isSend {
			t.Errorf("code %d: fields read flat %v", code, r.flat)
		}
	}
	for _, code := range []int32{remoting.QueryConsumerOffset, remoting.UpdateConsumerOffset} {
		if table[code].how != inOrder {
			t.Errorf("code %d is not served in order", code)
		}
	}
	for _, code := range []int32{remoting.PopMessage, remoting.AckMessage, remoting.ChangeMessageInvisibleTime, remoting.BatchAckMessage} {
		if _, ok := table[code]; !ok {
			t.Errorf("POP code %d not in the table", code)
		}
	}
}

// TestArchitectureDocNamesEveryCode: docs/architecture.md's table names, for every code the
// broker serves, an existing file of this package, and names no code the broker does not serve,
// so a reader can go from a request code to the file that handles it.
func TestArchitectureDocNamesEveryCode(t *testing.T) {
	doc, err := os.ReadFile("../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| [A-Z_0-9]+(?: \\(ours\\))? \\| (\\d+) \\| `broker/([a-z_0-9]+\\.go)` \\| `([A-Za-z]+\\.[A-Za-z]+)` \\|")
	documented, handler := map[int32]string{}, map[int32]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		code, _ := strconv.Atoi(m[1])
		documented[int32(code)], handler[int32(code)] = m[2], m[3]
	}
	table := (&Broker{}).handlers()
	for code, r := range table {
		file, ok := documented[code]
		if !ok {
			t.Errorf("code %d is served but has no row in docs/architecture.md", code)
			continue
		}
		if _, err := os.Stat(file); err != nil {
			t.Errorf("code %d: docs/architecture.md names broker/%s: %v", code, file, err)
		}
		// The method behind the entry, as the runtime names it: "rocketraft/broker.(*sender).
		// handleSend-fm". Entries built by a wrapper (a closure) name the wrapper; the doc's
		// type.method is checked only against a method value.
		name := runtime.FuncForPC(reflect.ValueOf(r.handle).Pointer()).Name()
		if strings.Contains(name, ".func") {
			continue
		}
		name = strings.NewReplacer("rocketraft/broker.", "", "(*", "", ")", "", "-fm", "").Replace(name)
		if name != handler[code] {
			t.Errorf("code %d: docs/architecture.md names %s, the table has %s", code, handler[code], name)
		}
	}
	for code := range documented {
		if _, ok := table[code]; !ok {
			t.Errorf("docs/architecture.md lists code %d, which the broker does not serve", code)
		}
	}
}
