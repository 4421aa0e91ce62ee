package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Containerfile instruction: its keyword (upper case) and the rest of it,
// continuation lines joined.
type instruction struct {
	op, args string
}

// parseContainerfile splits a Containerfile into instructions, dropping comments and blank lines.
func parseContainerfile(text string) []instruction {
	var out []instruction
	var cur strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		op, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(op), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// stages groups the instructions after each FROM (the FROM included).
func stages(ins []instruction) [][]instruction {
	var out [][]instruction
	for _, in := range ins {
		if in.op == "FROM" {
			out = append(out, nil)
		}
		if len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], in)
		}
	}
	return out
}

// TestContainerfile lints the Containerfile's structure: a golang builder stage on go.mod's Go
// version that builds through the Makefile's static target (the one make dist packs), a runtime
// stage that copies only existing files, runs as the non-root user the Kubernetes manifests
// name, exposes exactly the ports the compose stack's configurations use, and whose default
// command is one of the binaries.
func TestContainerfile(t *testing.T) {
	ins := parseContainerfile(string(readFile(t, "Containerfile")))
	args := map[string]string{}
	for _, in := range ins {
		if in.op == "ARG" {
			k, v, _ := strings.Cut(in.args, "=")
			if _, seen := args[k]; !seen || v != "" {
				args[k] = v
			}
		}
	}
	st := stages(ins)
	if len(st) < 2 {
		t.Fatalf("want a builder and a runtime stage, got %d FROM", len(st))
	}

	// Builder: golang at go.mod's version, building with make static.
	from := st[0][0].args
	if !regexp.MustCompile(`^\S*golang:\$\{GO_VERSION\}\S* AS build$`).MatchString(from) {
		t.Errorf("builder FROM %q: want golang:${GO_VERSION} AS build", from)
	}
	gomod := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(string(readFile(t, "go.mod")))
	if gomod == nil || args["GO_VERSION"] != gomod[1] {
		t.Errorf("ARG GO_VERSION=%q, go.mod says go %v", args["GO_VERSION"], gomod)
	}
	var build string
	for _, in := range st[0] {
		if in.op == "RUN" && strings.Contains(in.args, "make ") {
			build = in.args
		}
	}
	if !strings.Contains(build, "make static ") || !strings.Contains(build, "STATIC_BIN=/out") {
		t.Errorf("builder RUN %q: want make static STATIC_BIN=/out (the target make dist uses)", build)
	}
	makefile := string(readFile(t, "Makefile"))
	recipe := regexp.MustCompile(`(?m)^static:\n\t.*\n\t(.*)$`).FindStringSubmatch(makefile)
	if recipe == nil || !strings.Contains(recipe[1], "CGO_ENABLED=0") || !strings.Contains(recipe[1], "$(LDFLAGS)") ||
		!strings.Contains(recipe[1], "$(addprefix ./cmd/,$(BINARIES))") {
		t.Errorf("Makefile static recipe %v: want CGO_ENABLED=0, $(LDFLAGS) and every binary", recipe)
	}
	if !strings.Contains(string(readFile(t, "scripts/dist.sh")), `"$MAKE" --no-print-directory static `) {
		t.Error("scripts/dist.sh does not build through make static")
	}

	// Runtime stage.
	rt := st[len(st)-1]
	var user, cmd string
	var exposed []int
	for _, in := range rt {
		switch in.op {
		case "USER":
			user = in.args
		case "CMD":
			cmd = in.args
		case "EXPOSE":
			for _, f := range strings.Fields(in.args) {
				p, err := strconv.Atoi(strings.TrimSuffix(f, "/tcp"))
				if err != nil {
					t.Errorf("EXPOSE %q: not a port", f)
				}
				exposed = append(exposed, p)
			}
		case "COPY":
			if strings.HasPrefix(in.args, "--from=") {
				continue
			}
			srcs := strings.Fields(in.args)
			for _, s := range srcs[:len(srcs)-1] {
				if _, err := os.Stat(filepath.Join(repoRoot, s)); err != nil {
					t.Errorf("COPY %s: %v", s, err)
				}
			}
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("runtime USER %q: want a non-root user", user)
	}
	if uid != strconv.Itoa(k8sRunAsUser) {
		t.Errorf("runtime USER %q, the Kubernetes manifests run as %d", user, k8sRunAsUser)
	}
	want := composePorts(t)
	sort.Ints(exposed)
	if intsString(exposed) != intsString(want) {
		t.Errorf("EXPOSE %v, the compose stack's configurations use %v", exposed, want)
	}
	bin := regexp.MustCompile(`^\["([^"]+)"`).FindStringSubmatch(cmd)
	if bin == nil {
		t.Fatalf("CMD %q: want the exec form", cmd)
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "cmd", bin[1])); err != nil {
		t.Errorf("CMD runs %q, not one of cmd/*: %v", bin[1], err)
	}
}

// intsString prints sorted ports for comparison.
func intsString(p []int) string {
	s := make([]string, len(p))
	for i, v := range p {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, " ")
}
