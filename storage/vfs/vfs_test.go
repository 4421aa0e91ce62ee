package vfs

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// testFS runs the contract every implementation must meet.
func testFS(t *testing.T, fsys FS, root string) {
	dir := filepath.Join(root, "a", "b")
	if err := fsys.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "00000000000000000000")
	m, err := fsys.Map(name, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Bytes()) != 8192 {
		t.Fatalf("mapped %d bytes", len(m.Bytes()))
	}
	copy(m.Bytes()[5000:], "hello")
	if err := m.Sync(5000, 5); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteAt([]byte("world"), 6000); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncBlocking(6000, 5); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m, err = fsys.Map(name, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Bytes()[5000:5005]) != "hello" || string(m.Bytes()[6000:6005]) != "world" {
		t.Fatal("data lost over remap")
	}
	m.Close()
	if _, err := fsys.Map(name, 4096); err == nil {
		t.Fatal("mapping with a different size accepted")
	}
	if st, err := fsys.Stat(name); err != nil || st.Size != 8192 || st.IsDir {
		t.Fatalf("stat %+v %v", st, err)
	}
	// A file a power loss cut short (its preallocated length was not durable) maps at full
	// size: the bytes it kept, then zeros.
	short := filepath.Join(dir, "00000000000000008192")
	if err := fsys.WriteFile(short, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if m, err = fsys.Map(short, 8192); err != nil {
		t.Fatalf("map a short file: %v", err)
	}
	if b := m.Bytes(); len(b) != 8192 || string(b[:4]) != "kept" || b[4] != 0 || b[8191] != 0 {
		t.Fatalf("short file mapped as %d bytes starting %q", len(b), b[:min(8, len(b))])
	}
	m.Close()
	if st, err := fsys.Stat(short); err != nil || st.Size != 8192 {
		t.Fatalf("short file after map: %+v %v", st, err)
	}
	if err := fsys.Remove(short); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat missing: %v", err)
	}
	if err := fsys.WriteFile(filepath.Join(dir, "abort"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Rename(filepath.Join(dir, "abort"), filepath.Join(dir, "abort2")); err != nil {
		t.Fatal(err)
	}
	names, err := fsys.ReadDir(dir)
	if err != nil || len(names) != 2 || names[0] != "00000000000000000000" || names[1] != "abort2" {
		t.Fatalf("readdir %v %v", names, err)
	}
	if _, err := fsys.ReadDir(filepath.Join(root, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("readdir missing: %v", err)
	}
	l, err := fsys.Lock(filepath.Join(root, "lock"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Lock(filepath.Join(root, "lock")); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	l.Close()
	l, err = fsys.Lock(filepath.Join(root, "lock"))
	if err != nil {
		t.Fatalf("relock: %v", err)
	}
	l.Close()
	if u, err := fsys.DiskUsage(root); err != nil || u.Total == 0 || u.Ratio() < 0 || u.Ratio() > 100 {
		t.Fatalf("usage %+v %v", u, err)
	}
	if err := fsys.Remove(filepath.Join(root, "a")); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("remove did not remove the tree")
	}
}

func TestOSFS(t *testing.T)  { testFS(t, OS{}, t.TempDir()) }
func TestMemFS(t *testing.T) { testFS(t, NewMemFS(), "/root") }

func TestMemFSCrashKeepsOnlySynced(t *testing.T) {
	m := NewMemFS()
	m.MkdirAll("/d")
	mp, _ := m.Map("/d/f", 3*PageSize)
	b := mp.Bytes()
	copy(b, "synced")
	mp.Sync(0, 6)
	copy(b[10:], "unsynced")
	copy(b[PageSize:], "page1")
	copy(b[2*PageSize:], "page2")
	c := m.Crash()
	got, _ := c.ReadFile("/d/f")
	if string(got[:6]) != "synced" || got[10] != 0 || got[PageSize] != 0 {
		t.Fatalf("crash kept unsynced bytes")
	}
	c2 := m.CrashKeeping(func(name string, page int) bool { return page == 2 })
	got, _ = c2.ReadFile("/d/f")
	if got[PageSize] != 0 || string(got[2*PageSize:2*PageSize+5]) != "page2" || got[10] != 0 {
		t.Fatalf("CrashKeeping kept the wrong pages")
	}
}

func TestMemFSFaults(t *testing.T) {
	m := NewMemFS()
	m.MkdirAll("/d")
	mp, _ := m.Map("/d/f", 4096)
	m.FailNth(OpSync, 2)
	if err := mp.Sync(0, 1); err != nil {
		t.Fatal(err)
	}
	if err := mp.Sync(0, 1); !errors.Is(err, ErrInjected) {
		t.Fatalf("2nd sync: %v", err)
	}
	if err := mp.Sync(0, 1); err != nil {
		t.Fatalf("3rd sync: %v", err)
	}
	m.FailAll(OpRename)
	m.WriteFile("/d/x", nil)
	if err := m.Rename("/d/x", "/d/y"); !errors.Is(err, ErrInjected) {
		t.Fatal(err)
	}
	m.SetFull(true)
	if _, err := m.Map("/d/g", 4096); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("full map: %v", err)
	}
	if u, _ := m.DiskUsage("/"); u.Ratio() != 100 {
		t.Fatalf("full usage %v", u.Ratio())
	}
	m.ClearFaults()
	if err := m.Rename("/d/x", "/d/y"); err != nil {
		t.Fatal(err)
	}
	if m.Calls(OpSync) != 3 {
		t.Fatalf("calls %d", m.Calls(OpSync))
	}
}

func TestMemFSRenameDir(t *testing.T) {
	m := NewMemFS()
	if err := m.MkdirAll("/a/b/c"); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteFile("/a/b/c/f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteFile("/a/b/g", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("/a/b", "/a/z"); err != nil {
		t.Fatal(err)
	}
	if b, err := m.ReadFile("/a/z/c/f"); err != nil || string(b) != "x" {
		t.Fatalf("%q %v", b, err)
	}
	if names, _ := m.ReadDir("/a"); len(names) != 1 || names[0] != "z" {
		t.Fatalf("%v", names)
	}
	if _, err := m.Stat("/a/b/g"); err == nil {
		t.Fatal("old path still there")
	}
	if err := m.MkdirAll("/a/q"); err != nil {
		t.Fatal(err)
	}
	if err := m.Rename("/a/z", "/a/q"); err == nil {
		t.Fatal("renamed onto an existing directory")
	}
}
