package gil

import (
	"debug/elf"
	"errors"
	"os"
	"testing"
)

// TestReadUSDTFixture reads the notes of a gcc-built executable with three
// SDT probes (testdata/usdt/fixture.c): each probe's offset lands on its
// nop in the file, and each semaphore in the .probes section.
func TestReadUSDTFixture(t *testing.T) {
	const path = "testdata/usdt/usdt.elf"
	img, err := ReadFile(openELF(t, path))
	if err != nil {
		t.Fatal(err)
	}
	probes := img.USDT
	want := []struct{ provider, name, args string }{
		{"fixture", "args", "-4@-4(%rbp) -8@-16(%rbp) -4@$42"},
		{"python", "gc__start", "-4@%edi"},
		{"python", "gc__done", "-8@%rdx"},
	}
	if len(probes) != len(want) {
		t.Fatalf("%d probes, want %d: %+v", len(probes), len(want), probes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sems := f.Section(".probes")
	seen := map[uint64]bool{}
	for i, w := range want {
		p := probes[i]
		if p.Provider != w.provider || p.Name != w.name || p.Args != w.args {
			t.Errorf("probe %d = %s:%s %q, want %s:%s %q", i, p.Provider, p.Name, p.Args, w.provider, w.name, w.args)
		}
		if p.Offset >= uint64(len(data)) || data[p.Offset] != 0x90 {
			t.Errorf("%s:%s offset %#x is not on a nop", p.Provider, p.Name, p.Offset)
		}
		if p.SemaphoreOffset < sems.Offset || p.SemaphoreOffset >= sems.Offset+sems.Size || seen[p.SemaphoreOffset] {
			t.Errorf("%s:%s semaphore at %#x, want a distinct one in .probes [%#x, %#x)", p.Provider, p.Name,
				p.SemaphoreOffset, sems.Offset, sems.Offset+sems.Size)
		}
		seen[p.SemaphoreOffset] = true
	}
}

func TestReadUSDTWithoutNotes(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	img, err := ReadFile(openELF(t, exe))
	if err != nil || img.USDT != nil || img.USDTErr != nil {
		t.Fatalf("ReadFile(test binary) = %+v, %v; want no probes, no error", img, err)
	}
	if _, err := ReadFile(openELF(t, "testdata/usdt/fixture.c")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("ReadFile of a C source: %v, want ErrMalformed", err)
	}
}

func TestParseUSDTArgs(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want []USDTArg
		err  error
	}{
		{"-4@%edi", []USDTArg{{Size: 4, Signed: true, Loc: ArgRegister, Reg: "rdi"}}, nil},
		{"8@%r12", []USDTArg{{Size: 8, Loc: ArgRegister, Reg: "r12"}}, nil},
		{"-4@%r9d", []USDTArg{{Size: 4, Signed: true, Loc: ArgRegister, Reg: "r9"}}, nil},
		// Debian's python3.11 gc__start.
		{"-4@112(%rsp)", []USDTArg{{Size: 4, Signed: true, Loc: ArgMemory, Reg: "rsp", Offset: 112}}, nil},
		{"2@(%rax)", []USDTArg{{Size: 2, Loc: ArgMemory, Reg: "rax"}}, nil},
		{"-4@-4(%rbp) -8@-16(%rbp) -4@$42", []USDTArg{
			{Size: 4, Signed: true, Loc: ArgMemory, Reg: "rbp", Offset: -4},
			{Size: 8, Signed: true, Loc: ArgMemory, Reg: "rbp", Offset: -16},
			{Size: 4, Signed: true, Loc: ArgConstant, Offset: 42},
		}, nil},
		{"", nil, nil},
		{"1@%al", nil, ErrUnsupportedArg},
		{"-4@_PyRuntime+8(%rip)", nil, ErrUnsupportedArg},
		{"8@16(%rip)", nil, ErrUnsupportedArg},
		{"8@8(%rax,%rbx,8)", nil, ErrUnsupportedArg},
		{"3@%eax", nil, errAny},
		{"%eax", nil, errAny},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got, err := ParseUSDTArgs(tc.spec)
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != nil && err == nil:
				t.Fatalf("= %+v, want an error", got)
			case tc.err != nil && !errors.Is(tc.err, errAny) && !errors.Is(err, tc.err):
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if tc.err != nil {
				var ue *USDTError
				if !errors.As(err, &ue) {
					t.Fatalf("error %T, want *USDTError naming the argument", err)
				}
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("= %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("arg %d = %+v, want %+v", i+1, got[i], tc.want[i])
				}
			}
		})
	}
}

// errAny stands for any error in table tests.
var errAny = errors.New("any error")
