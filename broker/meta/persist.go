package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"

	"github.com/hashicorp/go-hclog"

	"rocketraft/protocol"
)

// ErrCorrupt is wrapped by Open* errors when a table file cannot be parsed and no usable backup
// exists.
var ErrCorrupt = errors.New("meta: corrupt table file")

// ErrInvalid is wrapped by errors for mutations with unusable input (nil config, empty name).
var ErrInvalid = errors.New("meta: invalid argument")

// jsonFile is one table file with its .tmp and .bak companions.
type jsonFile struct {
	path   string
	logger hclog.Logger
}

func newJSONFile(path string, logger hclog.Logger) jsonFile {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return jsonFile{path: path, logger: logger}
}

// load decodes the file (or its backup) into v. found is false when neither exists or both are
// empty, in which case v is untouched.
func (f jsonFile) load(v any) (found bool, err error) {
	mainErr := readInto(f.path, v)
	if mainErr == nil {
		return true, nil
	}
	missing := errors.Is(mainErr, fs.ErrNotExist) || errors.Is(mainErr, errEmpty)
	if !missing {
		f.logger.Warn("table file unreadable, trying backup", "file", f.path, "error", mainErr)
	}
	bak := f.path + ".bak"
	// A failed decode may have filled part of v; start the backup from zero.
	reflect.ValueOf(v).Elem().SetZero()
	bakErr := readInto(bak, v)
	switch {
	case bakErr == nil:
		f.logger.Warn("loaded table from backup", "file", bak, "main_error", mainErr)
		return true, nil
	case missing && (errors.Is(bakErr, fs.ErrNotExist) || errors.Is(bakErr, errEmpty)):
		return false, nil
	case missing:
		return false, fmt.Errorf("%w: %s missing and backup %s: %v", ErrCorrupt, f.path, bak, bakErr)
	default:
		return false, fmt.Errorf("%w: %s: %v (backup: %v)", ErrCorrupt, f.path, mainErr, bakErr)
	}
}

var errEmpty = errors.New("empty file")

func readInto(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return errEmpty
	}
	return protocol.Decode(b, v)
}

// save encodes v indented (as Java's prettyFormat does) and replaces the file durably.
func (f jsonFile) save(v any) error {
	compact, err := protocol.Encode(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", f.path, err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, compact, "", "\t"); err != nil {
		return fmt.Errorf("indent %s: %w", f.path, err)
	}
	return writeAtomic(f.path, buf.Bytes())
}

// writeAtomic writes path.tmp, syncs it, keeps the current path as path.bak, renames the new
// file into place and syncs the directory.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp := path + ".tmp"
	if err := writeSynced(tmp, data); err != nil {
		return err
	}
	bak := path + ".bak"
	if _, err := os.Stat(path); err == nil {
		if err := os.Remove(bak); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", bak, err)
		}
		// A hard link keeps path in place until the rename replaces it; fall back to copying
		// on file systems without links.
		if err := os.Link(path, bak); err != nil {
			if err := copyFile(path, bak); err != nil {
				return err
			}
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return syncDir(dir)
}

func writeSynced(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	return nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("back up %s: %w", from, err)
	}
	return writeSynced(to, b)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// nextVersion is DataVersion.Next with the time passed in.
func nextVersion(d protocol.DataVersion, now int64) protocol.DataVersion {
	return protocol.DataVersion{Counter: d.Counter + 1, StateVersion: d.StateVersion, Timestamp: now}
}
