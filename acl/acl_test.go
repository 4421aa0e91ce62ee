package acl

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// goClientSign signs the way rocketmq-client-go's ACL interceptor does: AccessKey plus every
// ext field sorted by key, SecurityToken sent but NOT signed, then the body.
func goClientSign(ext map[string]string, body []byte, ak, sk, token string) {
	keys := []string{"AccessKey"}
	vals := map[string]string{"AccessKey": ak}
	for k, v := range ext {
		keys = append(keys, k)
		vals[k] = v
	}
	sortStrings(keys)
	var content strings.Builder
	for _, k := range keys {
		content.WriteString(vals[k])
	}
	mac := hmac.New(sha1.New, []byte(sk))
	mac.Write([]byte(content.String()))
	mac.Write(body)
	ext["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
	ext["AccessKey"] = ak
	if token != "" {
		ext["SecurityToken"] = token
	}
}

// javaClientSign signs the way Java's AclClientRPCHook (4.9+/5.x) does: AccessKey and
// SecurityToken are added first, then every ext field is signed.
func javaClientSign(ext map[string]string, body []byte, ak, sk, token string) {
	ext["AccessKey"] = ak
	if token != "" {
		ext["SecurityToken"] = token
	}
	keys := make([]string, 0, len(ext))
	for k := range ext {
		keys = append(keys, k)
	}
	sortStrings(keys)
	mac := hmac.New(sha1.New, []byte(sk))
	for _, k := range keys {
		mac.Write([]byte(ext[k]))
	}
	mac.Write(body)
	ext["Signature"] = base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func sendExt() map[string]string {
	return map[string]string{"a": "PG", "b": "TopicA", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0", "i": "UNIQ_KEY\x01abc\x02", "j": "0", "k": "false", "m": "false", "bname": "broker-a"}
}

func TestSignatureKnownVector(t *testing.T) {
	// Independently computed: HMAC-SHA1("secretKey1", "ak1234" + "v1" + "body").
	ext := map[string]string{"AccessKey": "ak1234", "x": "v1"}
	mac := hmac.New(sha1.New, []byte("secretKey1"))
	mac.Write([]byte("ak1234v1body"))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if got := Signature(ext, []byte("body"), "secretKey1"); got != want {
		t.Fatalf("Signature = %s, want %s", got, want)
	}
}

func TestVerifyClientQuirks(t *testing.T) {
	body := []byte("hello \xff body")
	cases := []struct {
		name string
		sign func(map[string]string, []byte, string, string, string)
		tok  string
	}{
		{"go", goClientSign, ""},
		{"go with security token (unsigned)", goClientSign, "tok-123"},
		{"java", javaClientSign, ""},
		{"java with security token (signed)", javaClientSign, "tok-123"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ext := sendExt()
			c.sign(ext, body, "producerAK", "producerSecret", c.tok)
			if !VerifySignature(ext, body, "producerSecret") {
				t.Fatal("valid signature refused")
			}
			if VerifySignature(ext, body, "otherSecret") {
				t.Fatal("wrong secret accepted")
			}
			if VerifySignature(ext, []byte("tampered"), "producerSecret") {
				t.Fatal("tampered body accepted")
			}
			ext2 := map[string]string{}
			for k, v := range ext {
				ext2[k] = v
			}
			ext2["b"] = "OtherTopic"
			if VerifySignature(ext2, body, "producerSecret") {
				t.Fatal("tampered ext field accepted")
			}
		})
	}
	// Older Java clients: _UNIQUE_KEY_QUERY added after signing.
	ext := map[string]string{"topic": "T", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "1"}
	javaClientSign(ext, nil, "adminAK", "adminSecret", "")
	ext["_UNIQUE_KEY_QUERY"] = "true"
	if !VerifySignature(ext, nil, "adminSecret") {
		t.Fatal("old Java unique-key query refused")
	}
	// Our own signer round-trips.
	ext = sendExt()
	Sign(ext, body, "brokerAK", "brokerSecret")
	if !VerifySignature(ext, body, "brokerSecret") {
		t.Fatal("Sign/VerifySignature disagree")
	}
}

func TestParsePerm(t *testing.T) {
	for in, want := range map[string]Perm{"DENY": Deny, "PUB": Pub, "sub": Sub, "PUB|SUB": Pub | Sub, "SUB | PUB": Pub | Sub} {
		if got, err := ParsePerm(in); err != nil || got != want {
			t.Errorf("ParsePerm(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "READ", "PUB|DENY", "PUB,SUB"} {
		if _, err := ParsePerm(bad); err == nil {
			t.Errorf("ParsePerm(%q) accepted", bad)
		}
	}
	if Deny.Allows(Pub) || !(Pub | Sub).Allows(Sub) || Pub.Allows(Sub) || Sub.Allows(Pub) || Perm(0).Allows(Sub) {
		t.Error("Allows wrong")
	}
}

func TestAddrPatterns(t *testing.T) {
	cases := []struct {
		pat  string
		yes  []string
		no   []string
		fail bool
	}{
		{pat: "*", yes: []string{"1.2.3.4:5", "::1"}},
		{pat: "192.168.0.*", yes: []string{"192.168.0.7:1234"}, no: []string{"192.168.1.7:1"}},
		{pat: "10.1-3.*.5", yes: []string{"10.2.99.5:1"}, no: []string{"10.4.0.5:1", "10.2.0.6:1"}},
		{pat: "10.0.0.{1,3}", yes: []string{"10.0.0.3:9"}, no: []string{"10.0.0.2:9"}},
		{pat: "172.16.0.0/12", yes: []string{"172.20.1.1:80", "[::ffff:172.20.1.1]:80"}, no: []string{"172.32.0.1:80"}},
		{pat: "::1", yes: []string{"[::1]:9876"}, no: []string{"127.0.0.1:9876"}},
		{pat: "127.0.0.1", yes: []string{"127.0.0.1:1"}, no: []string{"127.0.0.2:1", "garbage"}},
		{pat: "10.0.{1,2}.0", fail: true},
		{pat: "10.0.0.300", fail: true},
		{pat: "10.0.0", fail: true},
		{pat: "10.0.0.0/33", fail: true},
		{pat: "", fail: true},
	}
	for _, c := range cases {
		p, err := ParseAddrPattern(c.pat)
		if c.fail {
			if err == nil {
				t.Errorf("%q accepted", c.pat)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.pat, err)
			continue
		}
		for _, a := range c.yes {
			if !p.Match(a) {
				t.Errorf("%q should match %s", c.pat, a)
			}
		}
		for _, a := range c.no {
			if p.Match(a) {
				t.Errorf("%q should not match %s", c.pat, a)
			}
		}
	}
}

const testFile = `
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: producerAK
    secretKey: producerSecret
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - TopicA=PUB
      - TopicB=PUB|SUB
    groupPerms:
      - groupX=DENY
  - accessKey: adminAK
    secretKey: 87654321xyz
    whiteRemoteAddress: 192.168.9.9
    admin: true
dataVersion:
  - counter: 1
    timestamp: 1
`

func TestCheck(t *testing.T) {
	c, err := Parse([]byte(testFile))
	if err != nil {
		t.Fatal(err)
	}
	signed := func(ak, sk string, ext map[string]string) map[string]string {
		goClientSign(ext, nil, ak, sk, "")
		return ext
	}
	type tc struct {
		name  string
		req   Request
		allow bool
	}
	for _, x := range []tc{
		{"pub allowed", Request{RemoteAddr: "1.1.1.1:1", Ext: signed("producerAK", "producerSecret", map[string]string{"b": "TopicA"}), Resources: []Resource{Topic("TopicA", Pub)}}, true},
		{"sub on pub-only topic", Request{RemoteAddr: "1.1.1.1:1", Ext: signed("producerAK", "producerSecret", map[string]string{"topic": "TopicA"}), Resources: []Resource{Topic("TopicA", Sub)}}, false},
		{"default topic deny", Request{RemoteAddr: "1.1.1.1:1", Ext: signed("producerAK", "producerSecret", map[string]string{"topic": "TopicC"}), Resources: []Resource{Topic("TopicC", Pub)}}, false},
		{"default group sub, retry topic", Request{RemoteAddr: "1.1.1.1:1", Ext: signed("producerAK", "producerSecret", map[string]string{"b": "%RETRY%g1"}), Resources: []Resource{Topic("%RETRY%g1", Sub)}}, true},
		{"denied group", Request{RemoteAddr: "1.1.1.1:1", Ext: signed("producerAK", "producerSecret", map[string]string{"g": "groupX"}), Resources: []Resource{Group("groupX", Sub)}}, false},
		{"wrong secret", Request{RemoteAddr: "1.1.1.1:1", Ext: signed("producerAK", "nope12345", map[string]string{"b": "TopicA"}), Resources: []Resource{Topic("TopicA", Pub)}}, false},
		{"no signature", Request{RemoteAddr: "1.1.1.1:1", Ext: map[string]string{"AccessKey": "producerAK"}}, false},
		{"no access key", Request{RemoteAddr: "1.1.1.1:1", Ext: map[string]string{}}, false},
		{"unknown account", Request{RemoteAddr: "1.1.1.1:1", Ext: signed("someoneAK", "producerSecret", map[string]string{})}, false},
		{"admin code, non-admin", Request{RemoteAddr: "1.1.1.1:1", Ext: signed("producerAK", "producerSecret", map[string]string{"topic": "T"}), NeedAdmin: true}, false},
		{"admin code, admin", Request{RemoteAddr: "1.1.1.1:1", Ext: signed("adminAK", "87654321xyz", map[string]string{"topic": "T"}), NeedAdmin: true, Resources: []Resource{Topic("Anything", Pub)}}, true},
		{"global white list", Request{RemoteAddr: "10.10.103.4:5", Ext: map[string]string{}, NeedAdmin: true}, true},
		{"account white list skips signature", Request{RemoteAddr: "192.168.9.9:5", Ext: map[string]string{"AccessKey": "adminAK"}}, true},
	} {
		_, err := c.Check(x.req)
		if x.allow && err != nil {
			t.Errorf("%s: refused: %v", x.name, err)
		}
		if !x.allow && (err == nil || !errors.Is(err, ErrDenied)) {
			t.Errorf("%s: want ErrDenied, got %v", x.name, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	bad := map[string]string{
		"placeholder":     "accounts:\n  - accessKey: CHANGE_ME_ACCESS\n    secretKey: CHANGE_ME_SECRET\n",
		"rocketmq sample": "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n",
		"short key":       "accounts:\n  - accessKey: abc\n    secretKey: abcdefgh\n",
		"bad perm":        "accounts:\n  - accessKey: abcdefg\n    secretKey: abcdefgh\n    topicPerms: [T=READ]\n",
		"bad entry":       "accounts:\n  - accessKey: abcdefg\n    secretKey: abcdefgh\n    groupPerms: [noequals]\n",
		"duplicate":       "accounts:\n  - {accessKey: abcdefg, secretKey: abcdefgh}\n  - {accessKey: abcdefg, secretKey: abcdefgh}\n",
		"unknown key":     "acounts: []\n",
		"bad white":       "globalWhiteRemoteAddresses: [10.0.0.999]\n",
		"not yaml":        "accounts: [\n",
	}
	for name, data := range bad {
		if _, err := Parse([]byte(data)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Parse([]byte(bad["placeholder"])); !errors.Is(err, ErrPlaceholder) {
		t.Errorf("placeholder: %v, want ErrPlaceholder", err)
	}
	// A numeric secret key (YAML int) is read as text.
	c, err := Parse([]byte("accounts:\n  - accessKey: numeric1\n    secretKey: 98765432\n"))
	if err != nil || c.Accounts["numeric1"].SecretKey != "98765432" {
		t.Fatalf("numeric secret: %v %+v", err, c)
	}
}

// The shipped example must not load: its keys are placeholders.
func TestShippedExampleRefused(t *testing.T) {
	_, err := LoadFile(filepath.Join("..", "config", "plain_acl.example.yml"))
	if !errors.Is(err, ErrPlaceholder) {
		t.Fatalf("example file: %v, want ErrPlaceholder", err)
	}
}

func TestStoreReload(t *testing.T) {
	p := filepath.Join(t.TempDir(), "acl.yml")
	if err := os.WriteFile(p, []byte("accounts:\n  - {accessKey: first12, secretKey: secret12}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenStore(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go s.Watch(10*time.Millisecond, stop)
	// An invalid edit keeps the old accounts; a valid one replaces them.
	_ = os.WriteFile(p, []byte("accounts: [\n"), 0o600)
	time.Sleep(50 * time.Millisecond)
	if s.Current().Accounts["first12"] == nil {
		t.Fatal("invalid file replaced the accounts")
	}
	_ = os.WriteFile(p, []byte("accounts:\n  - {accessKey: second12, secretKey: secret12}\n  - {accessKey: third123, secretKey: secret12}\n"), 0o600)
	deadline := time.Now().Add(5 * time.Second)
	for s.Current().Accounts["second12"] == nil {
		if time.Now().After(deadline) {
			t.Fatal("valid change not reloaded")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
