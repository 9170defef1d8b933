package gil

import (
	"debug/elf"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// take_gil, drop_gil and gc_collect_main are static functions: a libpython
// linked with --strip-all (as the official python images' build does) no
// longer names them. Each is found through the exported functions that
// reach it, by decoding their machine code (direct calls, jumps, PLT stubs
// named by .rela.plt), and checked against what is known of it in every
// CPython 3.9-3.13:
//
//   - take_gil is the one function reached from both PyEval_RestoreThread
//     and PyEval_AcquireThread that calls pthread_cond_timedwait itself: it
//     waits on the GIL's condition with the switch interval as timeout, and
//     nothing else in libpython calls it. Where an unoptimised build leaves
//     the PyCOND_TIMEDWAIT helper out of line, its one caller is taken.
//   - drop_gil is the one reached from PyEval_SaveThread and
//     PyEval_ReleaseThread that calls pthread_cond_wait (the forced
//     switch's wait for the next holder), which only it calls; where an
//     exported caller has it inlined (Debian's LTO build inlines it into
//     PyEval_SaveThread), the one reached from the other.
//   - gc_collect_main (collect up to 3.9) is the one reached from
//     PyGC_Collect that calls PySys_WriteStderr (gc.DEBUG_STATS), passed 2
//     (the oldest generation) in its second argument register, by
//     PyGC_Collect or through the gc_collect_with_callback it calls so:
//     where the probe reads the generation.
//
// A candidate must be the only one, and start a function in the unwind
// table (.eh_frame_hdr, which stripping keeps) where the file has one:
// anything else is reported as not found, never guessed. The probes then
// attach at its entry exactly as at the symbol's.

// ErrNotDecoded is wrapped by the reasons static functions could not be
// found by decoding.
var ErrNotDecoded = errors.New("static function not found by decoding")

// staticTarget describes one static function and how it is recognised.
type staticTarget struct {
	symbol string
	// callers are exported functions that reach it (all of them, unless
	// one has it inlined).
	callers []string
	// marks is a function only it calls directly.
	marks string
	// gen, when set, is the constant the first caller passes in the
	// second argument register.
	gen int64
	// helper says the source calls the mark through a static inline
	// function, which an unoptimised build leaves out of line.
	helper bool
	// wanted says whether the symbol tables left it to be found.
	wanted func(Symbols) bool
}

var staticTargets = []staticTarget{
	{symbol: SymTakeGIL, callers: []string{SymRestoreThread, SymAcquireThread}, marks: "pthread_cond_timedwait", helper: true,
		wanted: func(s Symbols) bool { return !s.Has(SymTakeGIL) }},
	{symbol: SymDropGIL, callers: []string{SymSaveThread, SymReleaseThread}, marks: "pthread_cond_wait",
		wanted: func(s Symbols) bool { return !s.Has(SymDropGIL) }},
	{symbol: SymGCCollectMain, callers: []string{"PyGC_Collect"}, marks: "PySys_WriteStderr", gen: 2,
		wanted: func(s Symbols) bool { return s.GC() == "" }},
}

// entryHints are exported functions decoded only for the function
// entries they reveal: the ones that tail-jump into take_gil and drop_gil
// (PyEval_AcquireLock, PyEval_ReleaseLock) or call them after a fork.
var entryHints = []string{"PyEval_AcquireLock", "PyEval_ReleaseLock", "PyOS_AfterFork_Child"}

// namedCallees are the functions whose names the search needs, wherever
// they are defined: the marks, and functions that never return (the
// decoder stops after a call to them).
var namedCallees = map[string]bool{
	"pthread_cond_timedwait": true, "pthread_cond_wait": true, "PySys_WriteStderr": true,
	"Py_FatalError": true, "_Py_FatalErrorFunc": true, "_Py_FatalErrorFormat": true, "_Py_FatalError_TstateNULL": true,
	"_Py_FatalRefcountError": true, "PyThread_exit_thread": true, "abort": true, "exit": true, "_exit": true,
	"pthread_exit": true, "__stack_chk_fail": true, "__assert_fail": true, "__fortify_fail": true,
	"__chk_fail": true, "longjmp": true, "__longjmp_chk": true, "siglongjmp": true,
}

var noReturn = func() map[string]bool {
	m := map[string]bool{}
	for n := range namedCallees {
		if !strings.HasPrefix(n, "pthread_cond") && n != "PySys_WriteStderr" {
			m[n] = true
		}
	}
	return m
}()

// Bounds of one search, whatever the file: how many functions are
// decoded, how many instructions in all, how deep calls are followed from
// the exported callers.
const (
	searchFunctions = 1024
	searchInsns     = 400_000
	searchDepth     = 4
	// noReturnDepth bounds how deep a callee is decoded to learn whether
	// it returns.
	noReturnDepth = 2
)

// codeImage is what the search reads of an ELF file: its executable
// segments (read page by page through the budget), its exported
// functions, and the pointers through which it calls the functions it
// names.
type codeImage struct {
	rd      *imageReader
	machine elf.Machine
	decode  decoder
	segs    []elf.ProgHeader
	pages   map[uint64][]byte
	// exports maps the address of each function the file defines and
	// exports to its name, sizes to its size; byName the reverse, for the
	// names searched.
	exports map[uint64]string
	sizes   map[uint64]uint64
	byName  map[string]uint64
	// slots maps the address of a GOT entry to the name of the function
	// it points to, for namedCallees only.
	slots map[uint64]string
	// starts are the function starts of .eh_frame_hdr, sorted; nil when
	// the file has no such table.
	starts []uint64
	// stubs caches what each call target outside the exports is: the
	// name its PLT stub jumps to, or "" for a static function.
	stubs map[uint64]string
}

const codePage = 4096

// code returns up to maxInsnLen bytes at addr, nil outside the
// executable segments.
func (c *codeImage) code(addr uint64) ([]byte, error) {
	var out []byte
	for len(out) < maxInsnLen {
		a := addr + uint64(len(out))
		page, off := a&^(codePage-1), a&(codePage-1)
		b, ok := c.pages[page]
		if !ok {
			var err error
			if b, err = c.readPage(page); err != nil {
				return nil, err
			}
			c.pages[page] = b
		}
		if off >= uint64(len(b)) {
			break
		}
		out = append(out, b[off:min(uint64(len(b)), off+maxInsnLen-uint64(len(out)))]...)
		if uint64(len(b)) < codePage {
			break
		}
	}
	return out, nil
}

// readPage reads the executable bytes of one page; a page outside every
// executable segment reads as empty.
func (c *codeImage) readPage(page uint64) ([]byte, error) {
	for _, p := range c.segs {
		if page+codePage <= p.Vaddr || page >= p.Vaddr+p.Filesz {
			continue
		}
		// A segment starting inside the page leaves the bytes before it
		// zero: they are never an entry, being in no segment.
		lo, hi := max(page, p.Vaddr), min(page+codePage, p.Vaddr+p.Filesz)
		off := p.Off + (lo - p.Vaddr)
		if err := c.rd.within("code", off, hi-lo); err != nil {
			return nil, err
		}
		if err := c.rd.charge("code", off, hi-page); err != nil {
			return nil, err
		}
		b := make([]byte, hi-page)
		if _, err := c.rd.r.ReadAt(b[lo-page:], int64(off)); err != nil {
			return nil, &ELFError{Where: "code", Offset: off, Err: err}
		}
		return b, nil
	}
	return nil, nil
}

// callee names what a call target is: an exported function, a stub
// through a named slot, or "" (a static function, or an unnamed one).
func (c *codeImage) callee(addr uint64) (string, error) {
	if n, ok := c.exports[addr]; ok {
		return n, nil
	}
	if n, ok := c.stubs[addr]; ok {
		return n, nil
	}
	code, err := c.code(addr)
	if err != nil {
		return "", err
	}
	n := ""
	if slot, ok := stubSlot(c.machine, code, addr); ok {
		n = c.slots[slot]
		if n == "" {
			// A stub of a function not searched for: not static either.
			n = "?"
		}
	}
	c.stubs[addr] = n
	return n, nil
}

// body is what decoding one function from its entry found.
type body struct {
	calls []call
	// tails are jumps to other functions' entries.
	tails []uint64
	// named are the named functions it calls or jumps to.
	named map[string]bool
	// returns says whether a path reaches a return (or a tail call).
	returns bool
}

// call is one direct call: its target and, where the instructions before
// it in the same block set it to a constant, the second argument
// (arg2Known).
type call struct {
	target    uint64
	arg2      int64
	arg2Known bool
}

// search is one run over a file.
type search struct {
	c *codeImage
	// entries are the addresses known to start a function: exports and
	// direct call targets.
	entries map[uint64]bool
	bodies  map[uint64]*body
	insns   int
}

// decodeBody follows the paths of the function at entry: branches both
// ways, jumps to addresses not known as entries (they are its own
// blocks), until returns, tail calls, traps, indirect jumps, calls of
// functions that never return and padding after a call. depth bounds the
// decoding of callees to learn whether they return.
func (s *search) decodeBody(entry uint64, depth int) (*body, error) {
	if b, ok := s.bodies[entry]; ok {
		return b, nil
	}
	if len(s.bodies) >= searchFunctions {
		return nil, fmt.Errorf("%w: more than %d functions decoded", ErrLimit, searchFunctions)
	}
	b := &body{named: map[string]bool{}, returns: true}
	// Assumed to return while it is being decoded (recursion).
	s.bodies[entry] = b
	seen := map[uint64]bool{}
	work := []uint64{entry}
	returns := false
	for len(work) > 0 {
		pc := work[len(work)-1]
		work = work[:len(work)-1]
		var arg2 *call
		var lastCall bool
	block:
		for !seen[pc] {
			if pc != entry && s.entries[pc] {
				// Fell into the next function: this one ended in a call
				// that does not return.
				break
			}
			seen[pc] = true
			if s.insns++; s.insns > searchInsns {
				return nil, fmt.Errorf("%w: more than %d instructions decoded", ErrLimit, searchInsns)
			}
			code, err := s.c.code(pc)
			if err != nil {
				return nil, err
			}
			if len(code) == 0 {
				break
			}
			in, err := s.c.decode(code, pc)
			if err != nil || in.len == 0 {
				break
			}
			if in.padding && lastCall {
				// Alignment after a call: the callee did not return.
				break
			}
			lastCall = false
			next := pc + uint64(in.len)
			if in.arg2 {
				arg2 = &call{arg2: in.arg2Value, arg2Known: in.arg2Const}
			}
			switch in.flow {
			case flowNext:
				if in.slot != 0 {
					if n := s.c.slots[in.slot]; n != "" {
						b.named[n] = true
						if noReturn[n] {
							break block
						}
					}
				}
				pc = next
			case flowCall:
				cl := call{target: in.target}
				if arg2 != nil {
					cl.arg2, cl.arg2Known = arg2.arg2, arg2.arg2Known
				}
				arg2 = nil
				n, err := s.c.callee(in.target)
				if err != nil {
					return nil, err
				}
				if n != "" {
					b.named[n] = true
					if noReturn[n] {
						break block
					}
				} else {
					b.calls = append(b.calls, cl)
					if depth > 0 {
						cb, err := s.decodeBody(in.target, depth-1)
						if err != nil {
							return nil, err
						}
						if !cb.returns {
							break block
						}
					}
				}
				lastCall = true
				pc = next
			case flowBranch:
				work = append(work, in.target)
				pc = next
			case flowJump:
				if _, exported := s.c.exports[in.target]; exported || s.entries[in.target] {
					if n, err := s.c.callee(in.target); err != nil {
						return nil, err
					} else if n != "" {
						b.named[n] = true
					} else {
						b.tails = append(b.tails, in.target)
					}
					returns = true
					break block
				}
				if n, err := s.c.callee(in.target); err != nil {
					return nil, err
				} else if n != "" {
					// A tail call through a PLT stub.
					b.named[n] = true
					returns = returns || !noReturn[n]
					break block
				}
				if size := s.c.sizes[entry]; size > 0 && (in.target < entry || in.target-entry >= size) {
					// Out of an exported function's extent: a tail call
					// of a static function, whose entry that is.
					s.entries[in.target] = true
					b.tails = append(b.tails, in.target)
					returns = true
					break block
				}
				pc = in.target
				arg2 = nil
			case flowReturn:
				returns = true
				break block
			case flowStop:
				if in.slot != 0 {
					if n := s.c.slots[in.slot]; n != "" {
						b.named[n] = true
					}
					returns = returns || !noReturn[s.c.slots[in.slot]]
				}
				break block
			}
		}
	}
	b.returns = returns
	return b, nil
}

// findStatic finds the functions of staticTargets that want selects,
// adding each found to syms. It returns the names found and, for those not
// found, why (wrapping ErrNotDecoded; an *ELFError when the file cannot
// be read within its limits).
func findStatic(c *codeImage, syms Symbols, want func(staticTarget) bool) (found []string, err error) {
	var wanted []staticTarget
	for _, t := range staticTargets {
		if want(t) {
			wanted = append(wanted, t)
		}
	}
	if len(wanted) == 0 {
		return nil, nil
	}
	s := &search{c: c, entries: map[uint64]bool{}}
	for a := range c.exports {
		s.entries[a] = true
	}
	// Two rounds: the first learns which addresses are called (function
	// entries), the second decodes each function up to the next entry.
	var reach map[string]map[uint64]bool
	for range 2 {
		s.bodies = map[uint64]*body{}
		reach = map[string]map[uint64]bool{}
		for _, name := range entryHints {
			if _, err := s.reachable(name); err != nil {
				return nil, err
			}
		}
		for _, t := range wanted {
			for _, name := range t.callers {
				if reach[name] != nil {
					continue
				}
				r, err := s.reachable(name)
				if err != nil {
					return nil, err
				}
				reach[name] = r
			}
		}
	}
	var errs []error
	for _, t := range wanted {
		addr, err := s.identify(t, reach)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, ok := slices.BinarySearch(c.starts, addr); c.starts != nil && !ok {
			errs = append(errs, fmt.Errorf("%w: %s at %#x does not start a function in .eh_frame_hdr", ErrNotDecoded, t.symbol, addr))
			continue
		}
		off, ok := codeOffsetIn(c.segs, addr)
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s at %#x is outside the executable segments", ErrNotDecoded, t.symbol, addr))
			continue
		}
		syms[t.symbol] = off
		found = append(found, t.symbol)
	}
	return found, errors.Join(errs...)
}

// reachable returns the static functions reached from the exported
// function name through direct calls and tail calls, up to searchDepth
// calls deep; it records every call target as an entry.
func (s *search) reachable(name string) (map[uint64]bool, error) {
	root, ok := s.c.byName[name]
	if !ok {
		return nil, nil
	}
	out := map[uint64]bool{}
	level := []uint64{root}
	seen := map[uint64]bool{root: true}
	for d := 0; d <= searchDepth && len(level) > 0; d++ {
		var nextLevel []uint64
		for _, a := range level {
			b, err := s.decodeBody(a, noReturnDepth)
			if err != nil {
				return nil, err
			}
			for _, to := range append(callTargets(b.calls), b.tails...) {
				s.entries[to] = true
				if _, exported := s.c.exports[to]; exported || seen[to] {
					continue
				}
				seen[to] = true
				out[to] = true
				nextLevel = append(nextLevel, to)
			}
		}
		level = nextLevel
	}
	return out, nil
}

func callTargets(cs []call) []uint64 {
	out := make([]uint64, len(cs))
	for i, c := range cs {
		out[i] = c.target
	}
	return out
}

// identify picks the one function that is t: reached from all its
// callers (or, where an exported caller has it inlined, from any), calling
// its mark, passed its generation where it has one.
func (s *search) identify(t staticTarget, reach map[string]map[uint64]bool) (uint64, error) {
	for _, name := range t.callers {
		if _, ok := s.c.byName[name]; !ok {
			return 0, fmt.Errorf("%w: %s: the file does not export %s", ErrNotDecoded, t.symbol, name)
		}
	}
	all := func(a uint64) bool {
		for _, name := range t.callers {
			if !reach[name][a] {
				return false
			}
		}
		return true
	}
	var any []uint64
	for _, name := range t.callers {
		for a := range reach[name] {
			if b := s.bodies[a]; b != nil && b.named[t.marks] && !slices.Contains(any, a) {
				any = append(any, a)
			}
		}
	}
	slices.Sort(any)
	cands := slices.DeleteFunc(slices.Clone(any), func(a uint64) bool { return !all(a) })
	if len(cands) == 0 {
		cands = any
	}
	callers := strings.Join(t.callers, " and ")
	switch {
	case len(cands) == 0:
		return 0, fmt.Errorf("%w: %s: no function reached from %s calls %s", ErrNotDecoded, t.symbol, callers, t.marks)
	case len(cands) > 1:
		return 0, fmt.Errorf("%w: %s: %d functions reached from %s call %s (at %#x)", ErrNotDecoded, t.symbol, len(cands), callers, t.marks, cands)
	}
	found := cands[0]
	if t.helper {
		found = s.climb(found, all)
	}
	if t.gen != 0 && !s.passesGeneration(s.c.byName[t.callers[0]], found, t.gen) {
		return 0, fmt.Errorf("%w: %s: the function at %#x is not passed generation %d in its second argument from %s", ErrNotDecoded, t.symbol, found, t.gen, t.callers[0])
	}
	return found, nil
}

// climb returns the function that a helper at a was split out of: where
// a compiler left the static inline helper (PyCOND_TIMEDWAIT in a -O0
// build) out of line, the mark is called from the helper, whose only
// caller, reached from every exported caller too, is the function sought.
func (s *search) climb(a uint64, reachedFromAll func(uint64) bool) uint64 {
	var callers []uint64
	for from, b := range s.bodies {
		if _, exported := s.c.exports[from]; exported {
			continue
		}
		for _, cl := range b.calls {
			if cl.target == a && !slices.Contains(callers, from) {
				callers = append(callers, from)
			}
		}
	}
	if len(callers) != 1 || !reachedFromAll(callers[0]) || !reachedFromAll(a) {
		return a
	}
	return callers[0]
}

// passesGeneration reports whether root calls target with gen in the
// second argument register, directly or through one static function that
// it calls so and that passes on a value it did not set to another
// constant.
func (s *search) passesGeneration(root, target uint64, gen int64) bool {
	for _, cl := range s.bodies[root].calls {
		if !cl.arg2Known || cl.arg2 != gen {
			continue
		}
		if cl.target == target {
			return true
		}
		mid := s.bodies[cl.target]
		if mid == nil {
			continue
		}
		for _, c2 := range mid.calls {
			if c2.target == target && (!c2.arg2Known || c2.arg2 == gen) {
				return true
			}
		}
	}
	return false
}

// codeOffsetIn converts an address to its file offset through the
// executable segment holding it.
func codeOffsetIn(segs []elf.ProgHeader, addr uint64) (uint64, bool) {
	for _, p := range segs {
		if addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			off := addr - p.Vaddr + p.Off
			return off, off != 0
		}
	}
	return 0, false
}
