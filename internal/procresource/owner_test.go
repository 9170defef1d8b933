package procresource

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParseOwner(t *testing.T) {
	tests := []struct {
		name     string
		status   string
		uid, gid int
	}{
		{"effective ids, not the real ones", "Name:\tjava\nUid:\t0\t1001\t0\t0\nGid:\t0\t2002\t0\t0\n", 1001, 2002},
		{"first line, no newline at the end", "Uid:\t5\t6\t7\t8\nGid:\t9\t10\t11\t12", 6, 10},
		{"no Uid or Gid line", "Name:\tjava\nNSpid:\t10\t1\n", -1, -1},
		{"a line with only the real id", "Uid:\t1000\nGid:\t0\t3\t0\t0\n", -1, 3},
		{"not a number", "Uid:\t0\tx\t0\t0\nGid:\t0\t-4\t0\t0\n", -1, -1},
		{"a key that only starts the same", "Uidx:\t0\t7\t0\t0\nGid:\t0\t8\t0\t0\n", -1, 8},
		{"empty", "", -1, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if uid, gid := parseOwner([]byte(tt.status)); uid != tt.uid || gid != tt.gid {
				t.Errorf("parseOwner: %d:%d, want %d:%d", uid, gid, tt.uid, tt.gid)
			}
		})
	}
}

func TestOwner(t *testing.T) {
	root := t.TempDir()
	writeFakeProc(t, root, fakeProcess{pid: 10, comm: "java", start: 9, nspid: []int{10, 1}})
	if err := os.WriteFile(filepath.Join(root, "10", "status"), []byte("Name:\tjava\nUid:\t0\t1001\t0\t0\nGid:\t0\t2002\t0\t0\nNSpid:\t10\t1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFakeProc(t, root, fakeProcess{pid: 11, comm: "java", start: 9, nspid: []int{11, 1}}) // no Uid or Gid line
	r := NewReader(root, 0)
	if uid, gid, err := r.Owner(10); err != nil || uid != 1001 || gid != 2002 {
		t.Errorf("Owner(10): %d:%d, %v; want 1001:2002", uid, gid, err)
	}
	if uid, gid, err := r.Owner(11); err != nil || uid != -1 || gid != -1 {
		t.Errorf("Owner(11): %d:%d, %v; want -1:-1 and no error", uid, gid, err)
	}
	if uid, gid, err := r.Owner(12); !errors.Is(err, ErrNoProcess) || uid != -1 || gid != -1 {
		t.Errorf("Owner of a process that is gone: %d:%d, %v; want -1:-1 and ErrNoProcess", uid, gid, err)
	}
	// The collector's own process, through the real proc filesystem.
	if uid, gid, err := NewReader("", 0).Owner(os.Getpid()); err != nil || uid != os.Geteuid() || gid != os.Getegid() {
		t.Errorf("Owner(self): %d:%d, %v; want %d:%d", uid, gid, err, os.Geteuid(), os.Getegid())
	}
}
