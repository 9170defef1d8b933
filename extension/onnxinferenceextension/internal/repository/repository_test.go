package repository

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckName(t *testing.T) {
	for _, name := range []string{"runtime_overlap", "model-1", "IsolationForest", "a.b"} {
		if err := CheckName(name); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", "../etc", "a/b", `a\b`, ".hidden", "a\x00b"} {
		if err := CheckName(name); !errors.Is(err, ErrBadName) {
			t.Errorf("CheckName(%q) = %v, want ErrBadName", name, err)
		}
	}
}

// A name CheckName accepts stays one element inside the root.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"m", "..", "a/../b", ".x", "x\x00"} {
		f.Add(s)
	}
	root := filepath.FromSlash("/repo")
	f.Fuzz(func(t *testing.T, name string) {
		if CheckName(name) != nil {
			return
		}
		joined := filepath.Join(root, name)
		if filepath.Dir(joined) != root || filepath.Base(joined) != name {
			t.Fatalf("accepted %q, which resolves to %s", name, joined)
		}
	})
}

func TestPolicy(t *testing.T) {
	available := []int64{9, 5, 3, 1}
	tests := []struct {
		name   string
		policy Policy
		want   []int64
	}{
		{"default is the newest", Policy{}, []int64{9}},
		{"latest 2", Policy{Latest: 2}, []int64{9, 5}},
		{"latest more than there are", Policy{Latest: 10}, []int64{9, 5, 3, 1}},
		{"all", Policy{All: true}, []int64{9, 5, 3, 1}},
		{"specific", Policy{Specific: []int64{3, 4}}, []int64{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int64
			for _, v := range available {
				if tt.policy.Wants(v, available) {
					got = append(got, v)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("serves %v, want %v", got, tt.want)
			}
		})
	}
	for _, bad := range []Policy{{Latest: 1, All: true}, {All: true, Specific: []int64{1}}, {Latest: -1}, {Specific: []int64{0}}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func writeVersion(t *testing.T, root, model, version string, data string, age time.Duration) string {
	t.Helper()
	dir := filepath.Join(root, model, version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ModelFileName)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	when := time.Now().Add(-age)
	if err := os.Chtimes(path, when, when); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestVersions(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "m", "1", "one", time.Hour)
	writeVersion(t, root, "m", "10", "ten", time.Hour)
	writeVersion(t, root, "m", "2", "fresh", 0) // still settling
	writeVersion(t, root, "m", "3", "too large", time.Hour)
	writeVersion(t, root, "m", "007", "not canonical", time.Hour)
	writeVersion(t, root, "m", "latest", "not a number", time.Hour)
	writeVersion(t, root, "m", "-4", "negative", time.Hour)
	if err := os.MkdirAll(filepath.Join(root, "m", "11"), 0o755); err != nil { // no file yet
		t.Fatal(err)
	}
	repo, err := Open(root, 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := repo.Versions("m")
	if err != nil {
		t.Fatal(err)
	}
	var numbers []int64
	errs := map[int64]error{}
	for _, c := range got {
		numbers = append(numbers, c.Version)
		errs[c.Version] = c.Err
	}
	if !slices.Equal(numbers, []int64{11, 10, 3, 2, 1}) {
		t.Fatalf("versions %v, want [11 10 3 2 1]", numbers)
	}
	want := map[int64]error{11: ErrUnsettled, 10: nil, 3: ErrTooLarge, 2: ErrUnsettled, 1: nil}
	for v, w := range want {
		if (w == nil) != (errs[v] == nil) || (w != nil && !errors.Is(errs[v], w)) {
			t.Errorf("version %d: err %v, want %v", v, errs[v], w)
		}
	}
	data, err := repo.Read(got[4])
	if err != nil || string(data) != "one" {
		t.Fatalf("Read(1) = %q, %v", data, err)
	}
	if _, err := repo.Versions("../m"); !errors.Is(err, ErrBadName) {
		t.Fatalf("Versions(../m) = %v, want ErrBadName", err)
	}
}

func TestReadRefusesAFileThatChanged(t *testing.T) {
	root := t.TempDir()
	path := writeVersion(t, root, "m", "1", "original", time.Hour)
	repo, err := Open(root, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := repo.Versions("m")
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if err := os.WriteFile(path, []byte("rewritten, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Read(got[0]); !errors.Is(err, ErrUnsettled) {
		t.Fatalf("Read after a rewrite = %v, want ErrUnsettled", err)
	}
}

// A file renamed into place with the same size and modification time as
// the one it replaces has another fingerprint (its inode), and a candidate
// listed before the rename is not read from the new file.
func TestFingerprintSeesAFileRenamedIntoPlace(t *testing.T) {
	root := t.TempDir()
	path := writeVersion(t, root, "m", "1", "contents A", time.Hour)
	repo, err := Open(root, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	before, err := repo.Versions("m")
	if err != nil || len(before) != 1 || before[0].Err != nil {
		t.Fatal(before, err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	staged := filepath.Join(root, "m", "staged")
	if err := os.WriteFile(staged, []byte("contents B"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(staged, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(staged, path); err != nil {
		t.Fatal(err)
	}
	after, err := repo.Versions("m")
	if err != nil || len(after) != 1 || after[0].Err != nil {
		t.Fatal(after, err)
	}
	a, b := before[0].Fingerprint(), after[0].Fingerprint()
	if a.Size != b.Size || a.ModTime != b.ModTime {
		t.Fatalf("size and time differ (%+v, %+v): the test wants them equal", a, b)
	}
	if a == b {
		t.Fatalf("fingerprint %+v unchanged by a rename into place", a)
	}
	if _, err := repo.Read(before[0]); !errors.Is(err, ErrUnsettled) {
		t.Fatalf("Read of the replaced file's candidate = %v, want ErrUnsettled", err)
	}
	if data, err := repo.Read(after[0]); err != nil || string(data) != "contents B" {
		t.Fatalf("Read = %q, %v", data, err)
	}
	// Listing again without a change gives the same fingerprint.
	again, _ := repo.Versions("m")
	if again[0].Fingerprint() != b {
		t.Fatalf("fingerprint %+v, then %+v, with no change", b, again[0].Fingerprint())
	}
}

func TestLinksMustStayInside(t *testing.T) {
	outside := t.TempDir()
	writeVersion(t, outside, "x", "1", "outside", time.Hour)
	root := t.TempDir()
	writeVersion(t, root, "inside", "1", "inside", time.Hour)
	// A link to a sibling model inside the root is fine.
	if err := os.Symlink(filepath.Join(root, "inside"), filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "x"), filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "filelink", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "x", "1", ModelFileName), filepath.Join(root, "filelink", "1", ModelFileName)); err != nil {
		t.Fatal(err)
	}
	repo, err := Open(root, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	models, err := repo.Models()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(models, []string{"alias", "filelink", "inside"}) {
		t.Fatalf("models %v, want [alias filelink inside] (escape skipped)", models)
	}
	if _, err := repo.Versions("escape"); !errors.Is(err, ErrOutsideRoot) {
		t.Fatalf("Versions(escape) = %v, want ErrOutsideRoot", err)
	}
	got, err := repo.Versions("filelink")
	if err != nil || len(got) != 1 || !errors.Is(got[0].Err, ErrOutsideRoot) {
		t.Fatalf("Versions(filelink) = %+v, %v; want one version refused as outside", got, err)
	}
	if _, err := repo.Read(got[0]); !errors.Is(err, ErrOutsideRoot) {
		t.Fatalf("Read of a file linked outside = %v", err)
	}
	if got, err := repo.Versions("alias"); err != nil || len(got) != 1 || got[0].Err != nil {
		t.Fatalf("Versions(alias) = %+v, %v", got, err)
	}
}

func TestOpenRefusesAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(file, 0, 0); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("Open(file) = %v", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing"), 0, 0); err == nil {
		t.Fatal("Open(missing) succeeded")
	}
}

func TestReadConfig(t *testing.T) {
	root := t.TempDir()
	writeVersion(t, root, "m", "1", "x", time.Hour)
	repo, _ := Open(root, 0, 0)
	if data, err := repo.ReadConfig("m"); err != nil || data != nil {
		t.Fatalf("no config.yaml: %q, %v", data, err)
	}
	if err := os.WriteFile(filepath.Join(root, "m", ConfigFileName), []byte("version_policy: {all: true}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := repo.ReadConfig("m"); err != nil || !strings.Contains(string(data), "all") {
		t.Fatalf("config.yaml: %q, %v", data, err)
	}
}
