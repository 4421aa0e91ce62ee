package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"rocketraft/config"
	"rocketraft/proxy"
)

// repoRoot is the repository's top directory (the test runs in deploy/).
const repoRoot = ".."

// readFile reads a file of the repository.
func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return b
}

// yamlDocs decodes every document of a YAML stream into generic maps.
func yamlDocs(t *testing.T, rel string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(readFile(t, rel)))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("parse %s: %v", rel, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// get walks a decoded YAML tree along keys (map keys, or list indexes as decimal strings) and
// returns nil where the path does not exist.
func get(v any, keys ...string) any {
	for _, k := range keys {
		switch n := v.(type) {
		case map[string]any:
			v = n[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			v = n[i]
		default:
			return nil
		}
	}
	return v
}

// str is get for a scalar, as text ("" if absent).
func str(v any, keys ...string) string {
	switch s := get(v, keys...).(type) {
	case nil:
		return ""
	case string:
		return s
	case int:
		return strconv.Itoa(s)
	case bool:
		return strconv.FormatBool(s)
	default:
		return ""
	}
}

// list is get for a sequence (nil if absent).
func list(v any, keys ...string) []any {
	l, _ := get(v, keys...).([]any)
	return l
}

// strs is list for a sequence of scalars.
func strs(v any, keys ...string) []string {
	var out []string
	for _, e := range list(v, keys...) {
		out = append(out, str(e))
	}
	return out
}

// loadBroker runs mqbroker's configuration loader over a command line (without the program
// name), as the binary would at start-up, and fails the test on any error or warning: an unknown
// key, a bad value, an adjusted one. files maps a path the command names to a repository file
// or, with a "data:" prefix, to literal content.
func loadBroker(t *testing.T, where string, args []string, files map[string]string) *config.Broker {
	t.Helper()
	cfg, warn, err := config.LoadBroker(localPaths(t, args, files))
	if err != nil {
		t.Fatalf("%s: mqbroker %s: %v", where, strings.Join(args, " "), err)
	}
	if len(warn) > 0 {
		t.Fatalf("%s: mqbroker %s: warnings %q", where, strings.Join(args, " "), warn)
	}
	return cfg
}

// loadNamesrv is loadBroker for mqnamesrv.
func loadNamesrv(t *testing.T, where string, args []string) *config.Namesrv {
	t.Helper()
	cfg, warn, err := config.LoadNamesrv(args)
	if err != nil {
		t.Fatalf("%s: mqnamesrv %s: %v", where, strings.Join(args, " "), err)
	}
	if len(warn) > 0 {
		t.Fatalf("%s: mqnamesrv %s: warnings %q", where, strings.Join(args, " "), warn)
	}
	return cfg
}

// loadProxy is loadBroker for mqproxy (its -pc file, -n shorthand and validation as
// cmd/mqproxy's load).
func loadProxy(t *testing.T, where string, args []string) proxy.Config {
	t.Helper()
	cfg := proxy.DefaultConfig()
	err := config.LoadJSON("mqproxy", &cfg, config.JSONFile{Name: "pc"}, map[string]string{"namesrvAddr": "n"}, args)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatalf("%s: mqproxy %s: %v", where, strings.Join(args, " "), err)
	}
	return cfg
}

// localPaths replaces every argument that is a key of files with a local copy of its content.
func localPaths(t *testing.T, args []string, files map[string]string) []string {
	t.Helper()
	out := append([]string(nil), args...)
	for i, a := range out {
		src, ok := files[a]
		if !ok {
			continue
		}
		var content []byte
		if data, isData := strings.CutPrefix(src, "data:"); isData {
			content = []byte(data)
		} else {
			content = readFile(t, src)
		}
		p := filepath.Join(t.TempDir(), filepath.Base(a))
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		out[i] = p
	}
	return out
}
