package gil

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// pyenvLibPythons returns the shared libpython of each CPython 3.9+ that
// pyenv installed ($PYENV_ROOT, else ~/.pyenv), by version, as its
// interpreter's sysconfig names it.
func pyenvLibPythons(t testing.TB) map[string]string {
	t.Helper()
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Skipf("no home directory: %v", err)
		}
		root = filepath.Join(home, ".pyenv")
	}
	pythons, _ := filepath.Glob(filepath.Join(root, "versions", "3.*", "bin", "python3"))
	out := map[string]string{}
	for _, py := range pythons {
		version := filepath.Base(filepath.Dir(filepath.Dir(py)))
		if !pythonAtLeast39(version) {
			continue
		}
		cmd := exec.Command(py, "-c", "import sysconfig as s; print(s.get_config_var('LIBDIR') + '/' + (s.get_config_var('INSTSONAME') or ''))")
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", py, err)
		}
		lib := strings.TrimSpace(string(b))
		if _, err := os.Stat(lib); err != nil || !strings.HasPrefix(filepath.Base(lib), "libpython") {
			t.Logf("%s: no shared libpython (%s)", version, lib)
			continue
		}
		out[version] = lib
	}
	if len(out) == 0 {
		t.Skip("no pyenv CPython 3.9+ with a shared libpython installed")
	}
	return out
}

func pythonAtLeast39(version string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major == 3 && minor >= 9
}

// symtabOffsets returns the file offsets of the static GIL and GC
// functions in path's full symbol table (.symtab), under the names
// findStatic gives them: gc_collect_main for 3.9's collect too. Names
// with a compiler's suffix (take_gil.lto_priv.0) count as the function's.
func symtabOffsets(t testing.TB, path string) Symbols {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	want := map[string]string{SymTakeGIL: SymTakeGIL, SymDropGIL: SymDropGIL, SymGCCollectMain: SymGCCollectMain, SymGCCollectLegacy: SymGCCollectMain}
	out := Symbols{}
	for _, s := range syms {
		base, _, _ := strings.Cut(s.Name, ".")
		name, ok := want[base]
		if !ok || elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 {
			continue
		}
		if base == SymGCCollectLegacy && s.Name != SymGCCollectLegacy {
			continue
		}
		off, ok := codeOffset(f, s.Value)
		if !ok {
			t.Fatalf("%s: %s at %#x outside the executable segments", path, s.Name, s.Value)
		}
		if prev, dup := out[name]; dup && prev != off {
			t.Fatalf("%s: two functions named %s (%#x, %#x)", path, name, prev, off)
		}
		out[name] = off
	}
	return out
}

// stripCopy writes path stripped of every symbol table but .dynsym, as
// the official python images' build does (strip --strip-all), into the
// test's directory.
func stripCopy(t testing.TB, path string) string {
	t.Helper()
	strip, err := exec.LookPath("strip")
	if err != nil {
		t.Skipf("no strip (binutils) on PATH: %v", err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if b, err := exec.Command(strip, "--strip-all", "-o", out, path).CombinedOutput(); err != nil {
		t.Fatalf("strip %s: %v: %s", path, err, b)
	}
	return out
}

// checkDecoded reads path (whose symbol tables lack the static functions)
// and compares what decoding found with want, the unstripped symbol
// table's offsets.
func checkDecoded(t *testing.T, path string, want Symbols) {
	t.Helper()
	img, err := ReadFile(openELF(t, path))
	if err != nil {
		t.Fatal(err)
	}
	if img.DecodeErr != nil {
		t.Errorf("decode: %v", img.DecodeErr)
	}
	for _, name := range []string{SymTakeGIL, SymDropGIL, SymGCCollectMain} {
		if want[name] == 0 {
			t.Fatalf("the unstripped symbol table has no %s", name)
		}
		if !slices.Contains(img.Decoded, name) {
			t.Errorf("%s not decoded (decoded %v)", name, img.Decoded)
			continue
		}
		if got := img.Symbols[name]; got != want[name] {
			t.Errorf("%s decoded at file offset %#x, symbol table says %#x", name, got, want[name])
		}
	}
}

// TestStaticFunctionsFoundInStrippedCopies: the take_gil, drop_gil and
// gc_collect_main (collect) that decoding finds in a --strip-all copy of
// each installed CPython's libpython are where the original's symbol
// table puts them.
func TestStaticFunctionsFoundInStrippedCopies(t *testing.T) {
	for version, lib := range pyenvLibPythons(t) {
		t.Run(version, func(t *testing.T) {
			want := symtabOffsets(t, lib)
			stripped := stripCopy(t, lib)
			img, err := ReadFile(openELF(t, stripped))
			if err != nil {
				t.Fatal(err)
			}
			if img.Symbols.Has(SymTakeGIL) && !slices.Contains(img.Decoded, SymTakeGIL) {
				t.Fatal("the stripped copy still names take_gil")
			}
			checkDecoded(t, stripped, want)
		})
	}
}

// TestDecodingNotNeededWithSymbols: a file whose symbol table names the
// static functions is not decoded.
func TestDecodingNotNeededWithSymbols(t *testing.T) {
	for version, lib := range pyenvLibPythons(t) {
		t.Run(version, func(t *testing.T) {
			img, err := ReadFile(openELF(t, lib))
			if err != nil {
				t.Fatal(err)
			}
			if len(img.Decoded) != 0 || img.DecodeErr != nil {
				t.Errorf("decoded %v (%v), want nothing", img.Decoded, img.DecodeErr)
			}
		})
	}
}

// debianLibPythons returns the libpythons that `make test-deps` unpacks
// from Debian's packages into .cache/debian-libpython/<arch>: the
// release build (stripped, as shipped) and the -dbg build (with its
// symbol table) of libpython3.11, for amd64 and arm64.
func debianLibPythons(t testing.TB) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", ".cache", "debian-libpython")
	libs, _ := filepath.Glob(filepath.Join(dir, "*", "usr", "lib", "*-linux-gnu", "libpython3.*.so.1.0"))
	if len(libs) == 0 {
		t.Skipf("no Debian libpython unpacked in %s: run make test-deps", dir)
	}
	return libs
}

// stripAnyCopy strips path whatever its architecture: llvm-strip reads
// them all; GNU strip only the host's.
func stripAnyCopy(t testing.TB, path string) string {
	t.Helper()
	if _, err := exec.LookPath("llvm-strip"); err != nil {
		return stripCopy(t, path)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if b, err := exec.Command("llvm-strip", "--strip-all", "-o", out, path).CombinedOutput(); err != nil {
		t.Fatalf("llvm-strip %s: %v: %s", path, err, b)
	}
	return out
}

// TestStaticFunctionsFoundInDebianLibPython: in Debian's libpython3.11 for
// amd64 and arm64, the -dbg build stripped has the three functions found
// where its symbol table puts them; the release build, stripped as
// shipped, has all three found, each at a function start of its unwind
// table.
func TestStaticFunctionsFoundInDebianLibPython(t *testing.T) {
	for _, lib := range debianLibPythons(t) {
		arch := filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(lib)))))
		t.Run(arch+"/"+filepath.Base(lib), func(t *testing.T) {
			f, err := elf.Open(lib)
			if err != nil {
				t.Fatal(err)
			}
			hasSymtab := f.Section(".symtab") != nil
			_ = f.Close()
			if hasSymtab {
				checkDecoded(t, stripAnyCopy(t, lib), symtabOffsets(t, lib))
				return
			}
			checkAtFunctionStarts(t, lib)
		})
	}
}

// TestStaticFunctionsFoundInSystemPython: the distribution's python3
// (/usr/bin/python3, Debian's here: libpython and the python3.X executable
// stripped, linked with LTO) has all three found in each file that holds
// the interpreter, each at a function start of its unwind table.
func TestStaticFunctionsFoundInSystemPython(t *testing.T) {
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no %s", py)
	}
	b, err := exec.Command(py, "-c", "import sys, sysconfig as s; print(sys.executable); print(s.get_config_var('LIBDIR') + '/' + (s.get_config_var('INSTSONAME') or ''))").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range strings.Fields(string(b)) {
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			continue
		}
		t.Run(filepath.Base(real), func(t *testing.T) {
			f, err := elf.Open(real)
			if err != nil {
				t.Skipf("%s: %v", real, err)
			}
			hasSymtab := f.Section(".symtab") != nil
			_ = f.Close()
			if hasSymtab {
				checkDecoded(t, stripCopy(t, real), symtabOffsets(t, real))
				return
			}
			checkAtFunctionStarts(t, real)
		})
	}
}

// checkAtFunctionStarts reads path, which has no symbol table, and checks
// that all three functions are found, at start addresses of its unwind
// table: through ReadFile, and where the file has USDT GC probes (which
// ReadFile then uses instead of gc_collect_main) by decoding it directly.
func checkAtFunctionStarts(t *testing.T, path string) {
	t.Helper()
	img, err := ReadFile(openELF(t, path))
	if err != nil {
		t.Fatal(err)
	}
	if !img.Symbols.HasGIL() {
		t.Skipf("%s exports no GIL functions", path)
	}
	if img.DecodeErr != nil {
		t.Errorf("decode: %v", img.DecodeErr)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := &imageReader{r: openELF(t, path), size: 1 << 40, left: DefaultLimits.Bytes, lim: DefaultLimits}
	starts, err := rd.functionStarts(f)
	if err != nil || len(starts) == 0 {
		t.Fatalf("no unwind table function starts: %v", err)
	}
	found := img.Symbols
	if hasUSDTGC(img.USDT) {
		if slices.Contains(img.Decoded, SymGCCollectMain) {
			t.Errorf("gc_collect_main decoded where the file has USDT GC probes")
		}
		c, err := rd.newCodeImage(f)
		if err != nil {
			t.Fatal(err)
		}
		found = Symbols{}
		decoded, err := findStatic(c, found, func(staticTarget) bool { return true })
		if err != nil || len(decoded) != 3 {
			t.Errorf("decoding all three: %v, %v", decoded, err)
		}
	} else {
		for _, name := range []string{SymTakeGIL, SymDropGIL, SymGCCollectMain} {
			if !slices.Contains(img.Decoded, name) {
				t.Errorf("%s not decoded (decoded %v)", name, img.Decoded)
			}
		}
	}
	for _, name := range []string{SymTakeGIL, SymDropGIL, SymGCCollectMain} {
		addr, ok := fileAddress(f, found[name])
		if _, at := slices.BinarySearch(starts, addr); !ok || !at {
			t.Errorf("%s at file offset %#x (address %#x) starts no function of the unwind table", name, found[name], addr)
		}
	}
}

// fileAddress converts a file offset in an executable segment back to
// its address.
func fileAddress(f *elf.File, off uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && off >= p.Off && off-p.Off < p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}
