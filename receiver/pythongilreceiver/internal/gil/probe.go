//go:build linux && (amd64 || arm64)

package gil

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// Probe owns one loaded copy of the BPF programs and maps, and the uprobe
// links of every library it was attached to. Close releases all of it.
type Probe struct {
	opts   Options
	objs   gilObjects
	reader *ringbuf.Reader

	// futex are the futex tracepoints' links (Options.Futex): attached
	// from Load to Close, not duty-cycled.
	futex []link.Link

	mu        sync.Mutex
	libraries map[*Library]struct{}
	active    bool
	closed    bool
}

var removeMemlock = sync.OnceValue(rlimit.RemoveMemlock)

// Load loads the BPF objects. It fails with an error wrapping
// ErrUnavailable when the kernel refuses them (no CAP_BPF/CAP_PERFMON, BPF
// disabled, no ring buffer support).
func Load(opts Options) (*Probe, error) {
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; newer ones
	// do not need the limit lifted. A failure here matters only if loading
	// fails too.
	memlockErr := removeMemlock()
	spec, err := loadGil()
	if err != nil {
		return nil, fmt.Errorf("gil: read embedded BPF objects: %w", err)
	}
	minNS := uint64(max(opts.MinDuration, 0))
	if err := spec.Variables["min_duration_ns"].Set(minNS); err != nil {
		return nil, fmt.Errorf("gil: set min_duration_ns: %w", err)
	}
	filter := uint8(0)
	if opts.FilterPIDs {
		filter = 1
	}
	if err := spec.Variables["filter_pids"].Set(filter); err != nil {
		return nil, fmt.Errorf("gil: set filter_pids: %w", err)
	}
	futex := uint8(0)
	if opts.Futex {
		futex = 1
	}
	if err := spec.Variables["futex_waits"].Set(futex); err != nil {
		return nil, fmt.Errorf("gil: set futex_waits: %w", err)
	}
	p := &Probe{opts: opts, libraries: map[*Library]struct{}{}, active: true}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		if memlockErr != nil {
			err = errors.Join(err, fmt.Errorf("lift the memlock limit: %w", memlockErr))
		}
		return nil, unavailable("load BPF programs", err)
	}
	p.reader, err = ringbuf.NewReader(p.objs.Events)
	if err != nil {
		_ = p.objs.Close()
		return nil, unavailable("open ring buffer", err)
	}
	if err := p.setAttachedSince(); err != nil {
		_ = p.Close()
		return nil, err
	}
	if opts.Futex && !opts.Bare {
		for _, tp := range []struct {
			name string
			prog *ebpf.Program
		}{{"sys_enter_futex", p.objs.FutexEnter}, {"sys_exit_futex", p.objs.FutexExit}} {
			lk, err := link.Tracepoint("syscalls", tp.name, tp.prog, nil)
			if err != nil {
				_ = p.Close()
				return nil, unavailable("attach tracepoint syscalls:"+tp.name, err)
			}
			p.futex = append(p.futex, lk)
		}
	}
	return p, nil
}

func unavailable(what string, err error) error {
	return &UnavailableError{Op: what, Err: err}
}

// Close detaches every library and releases the BPF objects. It is safe to
// call more than once; ReadEvent returns ErrClosed afterwards.
func (p *Probe) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	libs := p.libraries
	p.libraries = nil
	p.mu.Unlock()
	var errs []error
	for l := range libs {
		errs = append(errs, l.close())
	}
	for _, lk := range p.futex {
		errs = append(errs, lk.Close())
	}
	errs = append(errs, p.reader.Close(), p.objs.Close())
	return errors.Join(errs...)
}

// setAttachedSince marks now as the start of an attached period: the BPF
// side discards state from before it.
func (p *Probe) setAttachedSince() error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return fmt.Errorf("gil: read CLOCK_MONOTONIC: %w", err)
	}
	if err := p.objs.ControlMap.Put(uint32(0), gilControl{AttachedSince: uint64(ts.Nano()), Active: 1}); err != nil {
		return fmt.Errorf("gil: write control map: %w", err)
	}
	return nil
}

// setDetached tells the BPF side that the uprobes are detached: the futex
// tracepoints then time waits from their own start.
func (p *Probe) setDetached() error {
	var c gilControl
	if err := p.objs.ControlMap.Lookup(uint32(0), &c); err != nil {
		return fmt.Errorf("gil: read control map: %w", err)
	}
	c.Active = 0
	if err := p.objs.ControlMap.Put(uint32(0), c); err != nil {
		return fmt.Errorf("gil: write control map: %w", err)
	}
	return nil
}

// GIL returns where the futex mechanism found pid's GIL (its struct's
// address in the process) and the switch interval read there, once a
// thread of pid has blocked on it; ok is false before.
func (p *Probe) GIL(pid uint32) (base uint64, interval time.Duration, ok bool) {
	var g gilGilInfo
	if err := p.objs.Gils.Lookup(pid, &g); err != nil {
		return 0, 0, false
	}
	return g.Base, time.Duration(g.Interval) * time.Microsecond, true
}

// Probe points, the attach cookies of gil.bpf.c's enum point.
const (
	pointSave    = 1
	pointRestore = 2
	pointEnsure  = 3
	pointDrop    = 4
	pointTake    = 5
	pointGC      = 6
	// USDT python:gc__start and gc__done, both entry probes; the cookie
	// of gc__start also carries its argument's location (usdtCookie).
	pointGCStartUSDT = 7
	pointGCDoneUSDT  = 8
)

// probePoint is one uprobe or uretprobe on one symbol.
type probePoint struct {
	symbol string
	ret    bool
	point  uint64
	// when says whether the point is wanted given what else the library has.
	when func(s Symbols, o Options) bool
}

func always(Symbols, Options) bool { return true }

var probePoints = []probePoint{
	{SymSaveThread, false, pointSave, always},
	{SymReleaseThread, false, pointSave, always},
	{SymRestoreThread, false, pointRestore, always},
	{SymAcquireThread, false, pointRestore, always},
	// Without take_gil (or the futex tracepoints) the wait ends when
	// RestoreThread returns.
	{SymRestoreThread, true, pointRestore, withRestoreReturn},
	{SymAcquireThread, true, pointRestore, withRestoreReturn},
	{SymGILStateEnsure, false, pointEnsure, always},
	{SymGILStateEnsure, true, pointEnsure, always},
	{SymDropGIL, false, pointDrop, withSwitch},
	{SymTakeGIL, false, pointTake, withSwitch},
	{SymTakeGIL, true, pointTake, withSwitch},
	{SymGCCollectMain, false, pointGC, withGC},
	{SymGCCollectMain, true, pointGC, withGC},
	{SymGCCollectLegacy, false, pointGC, withLegacyGC},
	{SymGCCollectLegacy, true, pointGC, withLegacyGC},
}

func withSwitch(s Symbols, o Options) bool { return !o.Futex && o.SwitchProbes && s.Switch() }

func withRestoreReturn(s Symbols, o Options) bool { return !o.Futex && !withSwitch(s, o) }

func withGC(s Symbols, o Options) bool { return o.GC && s.GC() == SymGCCollectMain }

func withLegacyGC(s Symbols, o Options) bool { return o.GC && s.GC() == SymGCCollectLegacy }

// Library is one ELF file (libpython or a static python executable) with
// the probe's uprobes attached to it. The uprobes are not tied to a pid:
// every process that maps the file is probed, including processes started
// later, and the pid filter (Options.FilterPIDs) selects among them.
type Library struct {
	probe   *Probe
	file    *os.File
	exe     *link.Executable
	symbols Symbols
	// usdt are the USDT GC probes, used when the symbol table has no GC
	// function; usdtErr says why there are none where notes exist.
	usdt    []target
	usdtErr error
	links   []link.Link
	// detached says Detach closed its links while the probe's others stay
	// attached; SetActive attaches it again.
	detached bool
	// decoded and decodeErr are Image.Decoded and Image.DecodeErr.
	decoded   []string
	decodeErr error
}

// target is one uprobe at a file offset: a symbol's, or a USDT probe's
// (with its semaphore's offset when it has one).
type target struct {
	symbol string
	offset uint64
	refCtr uint64
	ret    bool
	cookie uint64
	// usdt names a USDT probe ("python_gc__start").
	usdt string
}

// name is the target's symbol or USDT name, for errors and trace events.
func (t target) name() string {
	if t.symbol != "" {
		return t.symbol
	}
	return t.usdt
}

// Attach reads the ELF file f (libpython, or a static python executable,
// opened and checked by the caller, who keeps and closes it) within
// DefaultLimits and attaches the probes its symbols allow. The uprobes go
// at the file offsets read here, through /proc/self/fd/<n> of a duplicate
// of f that the Library holds: the kernel attaches to exactly the inode
// read, cilium/ebpf never reopens it to look symbols up, and re-attaching
// (duty cycling) works after the process that revealed it is gone. It
// fails with ErrNoSymbols when the file has none of the GIL functions, and
// with an *ELFError (ErrLimit, ErrMalformed) when it cannot be read safely.
func (p *Probe) Attach(f *os.File) (*Library, error) {
	img, err := ReadFile(f)
	if err != nil {
		return nil, err
	}
	return p.attachImage(f, img)
}

// attachImage attaches the probes img allows to f, img being what was read
// of f.
func (p *Probe) attachImage(f *os.File, img *Image) (*Library, error) {
	if !img.Symbols.HasGIL() {
		return nil, fmt.Errorf("gil: %s: %w", f.Name(), ErrNoSymbols)
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("gil: duplicate %s: %w", f.Name(), err)
	}
	held := os.NewFile(uintptr(fd), f.Name())
	exe, err := link.OpenExecutable(procroot.FDPath(fd))
	if err != nil {
		_ = held.Close()
		return nil, fmt.Errorf("gil: %s: %w", f.Name(), err)
	}
	l := &Library{probe: p, file: held, exe: exe, symbols: img.Symbols, decoded: img.Decoded, decodeErr: img.DecodeErr}
	if p.opts.GC && img.Symbols.GC() == "" {
		l.usdt, l.usdtErr = usdtGC(f.Name(), img)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = held.Close()
		return nil, fmt.Errorf("gil: attach %s: %w", f.Name(), ErrClosed)
	}
	switch {
	case p.active && p.anyDetached():
		// Some libraries are detached alone (Detach): the budget is being
		// spent on others. A new one waits, detached, for the next
		// SetActive(true), with every library.
		l.detached = true
	case p.active:
		if err := l.link(); err != nil {
			_ = l.close()
			return nil, fmt.Errorf("gil: attach %s: %w", f.Name(), err)
		}
	}
	p.libraries[l] = struct{}{}
	return l, nil
}

// Symbols returns the probed functions the library defines: what its
// symbol tables offer and what decoding found (Decoded).
func (l *Library) Symbols() Symbols { return l.symbols }

// Decoded returns the static functions found by decoding because the
// symbol tables lacked them, and why others they lacked could not be
// found (wrapping ErrNotDecoded), nil when none is missing.
func (l *Library) Decoded() ([]string, error) { return l.decoded, l.decodeErr }

// GC returns where GC pauses come from: the symbol probed
// (SymGCCollectMain, SymGCCollectLegacy), GCUSDT, or "" when the file has
// none of them (or GC probing is off); the error says why USDT notes the
// file has could not be used.
func (l *Library) GC() (string, error) {
	switch {
	case !l.probe.opts.GC:
		return "", nil
	case l.symbols.GC() != "":
		return l.symbols.GC(), nil
	case len(l.usdt) > 0:
		return GCUSDT, nil
	}
	return "", l.usdtErr
}

// usdtGC returns the uprobes for the python:gc__start and gc__done USDT
// probes of img (the file at path); none when it has no such notes.
func usdtGC(path string, img *Image) ([]target, error) {
	if img.USDTErr != nil {
		return nil, fmt.Errorf("gil: %s: %w", path, img.USDTErr)
	}
	probes := img.USDT
	var start, done *USDTProbe
	for i, pr := range probes {
		if pr.Provider != USDTProvider {
			continue
		}
		switch pr.Name {
		case USDTGCStart:
			start = &probes[i]
		case USDTGCDone:
			done = &probes[i]
		}
	}
	if start == nil || done == nil {
		return nil, nil
	}
	if start.Offset == 0 || done.Offset == 0 {
		// cilium/ebpf takes 0 for "look the symbol up".
		return nil, fmt.Errorf("gil: %s: USDT GC probe at file offset 0", path)
	}
	args, err := ParseUSDTArgs(start.Args)
	if err != nil {
		return nil, fmt.Errorf("gil: %s: %s:%s: %w", path, start.Provider, start.Name, err)
	}
	if len(args) < 1 {
		return nil, fmt.Errorf("gil: %s: %s:%s has no generation argument", path, start.Provider, start.Name)
	}
	cookie, err := usdtCookie(pointGCStartUSDT, args[0])
	if err != nil {
		return nil, fmt.Errorf("gil: %s: %s:%s: %w", path, start.Provider, start.Name, err)
	}
	return []target{
		{offset: start.Offset, refCtr: start.SemaphoreOffset, cookie: cookie, usdt: "python_gc__start"},
		{offset: done.Offset, refCtr: done.SemaphoreOffset, cookie: pointGCDoneUSDT, usdt: "python_gc__done"},
	}, nil
}

// usdtCookie encodes a point and the location of its USDT argument for
// gil.bpf.c's usdt_arg: point in bits 0-7, location 8-15, register index
// 16-23, size 24-31, constant or displacement (int32) 32-63.
func usdtCookie(point uint64, a USDTArg) (uint64, error) {
	if a.Offset < math.MinInt32 || a.Offset > math.MaxInt32 {
		return 0, fmt.Errorf("argument offset %d does not fit 32 bits: %w", a.Offset, ErrUnsupportedArg)
	}
	reg := 0
	if a.Loc != ArgConstant {
		reg = slices.Index(ptRegs, a.Reg)
		if reg < 0 {
			return 0, fmt.Errorf("register %q: %w", a.Reg, ErrUnsupportedArg)
		}
	}
	return point | uint64(a.Loc)<<8 | uint64(reg)<<16 | uint64(a.Size)<<24 | uint64(uint32(int32(a.Offset)))<<32, nil
}

// link attaches every wanted probe point, as two uprobe-multi links (one
// for entries, one for returns) where the kernel has them (6.6+), else as
// one link per point. On failure it undoes what it did.
func (l *Library) link() error {
	var entries, returns []target
	for _, pp := range probePoints {
		if !l.symbols.Has(pp.symbol) || !pp.when(l.symbols, l.probe.opts) {
			continue
		}
		if pts := l.probe.opts.Points; pts != nil && !slices.Contains(pts, pp.symbol) {
			continue
		}
		t := target{symbol: pp.symbol, offset: l.symbols[pp.symbol], ret: pp.ret, cookie: pp.point}
		if pp.ret {
			returns = append(returns, t)
		} else {
			entries = append(entries, t)
		}
	}
	// Set only when GC is wanted and the symbol table has no GC function.
	entries = append(entries, l.usdt...)
	err := ebpf.ErrNotSupported
	if !forceSingleLinks {
		err = l.linkMulti(entries, returns)
	}
	if errors.Is(err, ebpf.ErrNotSupported) {
		err = l.linkSingle(entries, returns)
	}
	if err != nil {
		_ = l.unlink()
		if errors.Is(err, os.ErrPermission) || errors.Is(err, ebpf.ErrNotSupported) {
			return unavailable("attach uprobes", err)
		}
		return err
	}
	return nil
}

// forceSingleLinks makes link use one link per probe point, as on kernels
// without uprobe-multi; tests set it to cover that path.
var forceSingleLinks = false

func (l *Library) linkMulti(entries, returns []target) error {
	progs := &l.probe.objs.gilPrograms
	entry, ret := progs.EntryMulti, progs.ReturnMulti
	if l.probe.opts.Bare {
		entry, ret = progs.CountMulti, progs.CountReturnMulti
	}
	for _, set := range []struct {
		points []target
		prog   *ebpf.Program
		attach func([]string, *ebpf.Program, *link.UprobeMultiOptions) (link.Link, error)
	}{
		{entries, entry, l.exe.UprobeMulti},
		{returns, ret, l.exe.UretprobeMulti},
	} {
		if len(set.points) == 0 {
			continue
		}
		n := len(set.points)
		syms := make([]string, n)
		cookies := make([]uint64, n)
		addrs := make([]uint64, n)
		refs := make([]uint64, n)
		var anyRef bool
		for i, t := range set.points {
			syms[i], cookies[i], addrs[i], refs[i] = t.symbol, t.cookie, t.offset, t.refCtr
			anyRef = anyRef || t.refCtr != 0
		}
		// Every target has its offset: cilium/ebpf looks up only the
		// symbols given without one, which would mean parsing the whole
		// file again, unbounded.
		opts := &link.UprobeMultiOptions{Cookies: cookies, Addresses: addrs}
		if anyRef {
			opts.RefCtrOffsets = refs
		}
		lk, err := set.attach(syms, set.prog, opts)
		if err != nil {
			return fmt.Errorf("uprobe-multi on %v: %w", syms, err)
		}
		l.links = append(l.links, lk)
	}
	return nil
}

func (l *Library) linkSingle(entries, returns []target) error {
	progs := &l.probe.objs.gilPrograms
	for _, pp := range append(entries, returns...) {
		var (
			lk  link.Link
			err error
		)
		opts := &link.UprobeOptions{Cookie: pp.cookie, Address: pp.offset, RefCtrOffset: pp.refCtr}
		switch {
		case l.probe.opts.Bare && pp.ret:
			lk, err = l.exe.Uretprobe(pp.name(), progs.CountReturnSingle, opts)
		case l.probe.opts.Bare:
			lk, err = l.exe.Uprobe(pp.name(), progs.CountSingle, opts)
		case pp.ret:
			lk, err = l.exe.Uretprobe(pp.name(), progs.ReturnSingle, opts)
		default:
			lk, err = l.exe.Uprobe(pp.name(), progs.EntrySingle, opts)
		}
		if err != nil {
			return fmt.Errorf("uprobe %s (return %v): %w", pp.name(), pp.ret, err)
		}
		l.links = append(l.links, lk)
	}
	return nil
}

// unlink closes every link. Closing a uprobe link waits for an RCU grace
// period in the kernel (around 100 ms here), so the links are closed
// concurrently: the waits overlap.
func (l *Library) unlink() error {
	errs := make([]error, len(l.links))
	var wg sync.WaitGroup
	for i, lk := range l.links {
		wg.Go(func() { errs[i] = lk.Close() })
	}
	wg.Wait()
	l.links = nil
	return errors.Join(errs...)
}

func (l *Library) close() error {
	return errors.Join(l.unlink(), l.file.Close())
}

// Links returns how many uprobe links are attached now.
func (l *Library) Links() int {
	l.probe.mu.Lock()
	defer l.probe.mu.Unlock()
	return len(l.links)
}

// Close detaches the library's probes and closes its file.
func (l *Library) Close() error {
	p := l.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.libraries[l]; !ok {
		return nil
	}
	delete(p.libraries, l)
	return l.close()
}

// SetActive attaches (true) or detaches (false) the probes of every
// library, for duty cycling; attaching also attaches again the libraries
// Detach detached. Windows open across a detached period are discarded,
// not reported with a wrong length.
func (p *Probe) SetActive(active bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if p.active == active && (!active || !p.anyDetached()) {
		return nil
	}
	p.active = active
	var errs []error
	if !active {
		for l := range p.libraries {
			errs = append(errs, l.unlink())
		}
		errs = append(errs, p.setDetached())
		return errors.Join(errs...)
	}
	// Every process is attached from here: none is treated as detached,
	// and what any thread did before now is stale (a library detached
	// alone missed its threads' calls since).
	if err := p.clearDetachedPIDs(); err != nil {
		return err
	}
	if err := p.setAttachedSince(); err != nil {
		return err
	}
	for l := range p.libraries {
		if len(l.links) == 0 {
			errs = append(errs, l.link())
		}
		l.detached = false
	}
	return errors.Join(errs...)
}

// Detach closes the uprobe links of libs while the other libraries' stay
// attached, so that the budget is spent on the processes of those; each
// library comes with the pids of the processes that map it, whose threads
// the kernel side then treats as while every uprobe is detached. It may be
// called again for a process that came to map a detached library since.
// SetActive(true) attaches them again; while the probe is detached as a
// whole, Detach does nothing.
func (p *Probe) Detach(libs map[*Library][]uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if !p.active {
		return nil
	}
	// Marked before the links close: a thread the uprobes see after its
	// mark is judged as detached, which costs its wait at most its cause,
	// never a wrong length.
	var closing []*Library
	for l, pids := range libs {
		if _, ok := p.libraries[l]; !ok {
			continue
		}
		for _, pid := range pids {
			if err := p.objs.DetachedPids.Put(pid, uint8(1)); err != nil {
				return fmt.Errorf("gil: mark pid %d detached: %w", pid, err)
			}
		}
		l.detached = true
		closing = append(closing, l)
	}
	// Each close waits for the kernel (unlink): all at once.
	errs := make([]error, len(closing))
	var wg sync.WaitGroup
	for i, l := range closing {
		wg.Go(func() { errs[i] = l.unlink() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Detached reports whether Detach detached l (and SetActive has not
// attached it again).
func (l *Library) Detached() bool {
	l.probe.mu.Lock()
	defer l.probe.mu.Unlock()
	return l.detached
}

func (p *Probe) anyDetached() bool {
	for l := range p.libraries {
		if l.detached {
			return true
		}
	}
	return false
}

// clearDetachedPIDs empties the kernel's set of processes detached alone.
func (p *Probe) clearDetachedPIDs() error {
	var (
		pid  uint32
		v    uint8
		pids []uint32
	)
	it := p.objs.DetachedPids.Iterate()
	for it.Next(&pid, &v) {
		pids = append(pids, pid)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("gil: read detached pids: %w", err)
	}
	for _, pid := range pids {
		if err := p.objs.DetachedPids.Delete(pid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("gil: clear detached pid %d: %w", pid, err)
		}
	}
	return nil
}

// Active reports whether the probes are attached (see SetActive).
func (p *Probe) Active() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.active
}

// SetDeadline makes ReadEvent return an error wrapping
// os.ErrDeadlineExceeded once the buffer is empty after t; the zero time
// removes the deadline. A deadline in the past drains what is pending. It
// waits for a ReadEvent in progress: from another goroutine use Flush.
func (p *Probe) SetDeadline(t time.Time) { p.reader.SetDeadline(t) }

// Flush makes a ReadEvent blocked on another goroutine return the pending
// events and then an error wrapping ErrFlushed; use it to drain the buffer
// before Close.
func (p *Probe) Flush() error { return p.reader.Flush() }

// eventContinues is gil.bpf.c's EVENT_CONTINUES.
const eventContinues = 1

// ErrFlushed is wrapped by ReadEvent's error after Flush, once the pending
// events have been read.
var ErrFlushed = ringbuf.ErrFlushed

// ReadEvent blocks until a window arrives in the ring buffer. It returns
// ErrClosed once the probe is closed.
func (p *Probe) ReadEvent() (Event, error) {
	var rec ringbuf.Record
	for {
		if err := p.reader.ReadInto(&rec); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return Event{}, ErrClosed
			}
			return Event{}, fmt.Errorf("gil: read ring buffer: %w", err)
		}
		if len(rec.RawSample) < int(unsafe.Sizeof(gilEvent{})) {
			continue
		}
		raw := (*gilEvent)(unsafe.Pointer(&rec.RawSample[0]))
		return Event{
			Kind:       Kind(raw.Kind),
			Cause:      Cause(raw.Cause),
			PID:        raw.Pid,
			TID:        raw.Tid,
			Start:      int64(raw.Start),
			Duration:   time.Duration(raw.Duration),
			Generation: raw.Generation,
			Continues:  raw.Flags&eventContinues != 0,
		}, nil
	}
}

// Aggregates returns the in-kernel counts and sums of short windows (GC
// pauses per generation), held time and forced switches, cumulative since
// each thread was first seen.
// They are kept in each thread's entry of the thread map (one lookup per
// probe hit); a thread's counts are written only by that thread, so a read
// may see one window's count without its sum, never a torn total.
func (p *Probe) Aggregates() (map[AggregateKey]Aggregate, error) {
	out := map[AggregateKey]Aggregate{}
	var (
		tid uint32
		t   gilThread
	)
	it := p.objs.Threads.Iterate()
	for it.Next(&tid, &t) {
		for kind, a := range t.Agg {
			if a.Count == 0 {
				continue
			}
			k := AggregateKey{PID: t.Pid, TID: tid, Kind: Kind(kind)}
			if k.Kind == KindGC {
				k.Generation = NoGeneration
			}
			out[k] = Aggregate{Count: a.Count, Sum: time.Duration(a.Sum)}
		}
		for gen, a := range t.GcAgg {
			if a.Count == 0 {
				continue
			}
			out[AggregateKey{PID: t.Pid, TID: tid, Kind: KindGC, Generation: gen}] = Aggregate{Count: a.Count, Sum: time.Duration(a.Sum)}
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("gil: read aggregates: %w", err)
	}
	return out, nil
}

// Forget removes the aggregates and per-thread state of pid, once the
// process has exited and its totals have been reported.
func (p *Probe) Forget(pid uint32) error {
	var (
		tid  uint32
		t    gilThread
		tids []uint32
	)
	it := p.objs.Threads.Iterate()
	for it.Next(&tid, &t) {
		if t.Pid == pid {
			tids = append(tids, tid)
		}
	}
	var errs []error
	if err := it.Err(); err != nil {
		errs = append(errs, err)
	}
	for _, tid := range tids {
		if err := p.objs.Threads.Delete(tid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, err)
		}
	}
	if err := p.objs.Pids.Delete(pid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, err)
	}
	// A pid reused by a new process has its GIL elsewhere.
	if err := p.objs.Gils.Delete(pid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, err)
	}
	if err := p.objs.DataRanges.Delete(pid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, err)
	}
	if err := p.objs.DetachedPids.Delete(pid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gil: forget pid %d: %w", pid, err)
	}
	return nil
}

// WaitsFromFutex reports whether waits come from the futex tracepoints
// (Options.Futex), which stay attached while the uprobes are detached.
func (p *Probe) WaitsFromFutex() bool { return p.opts.Futex }

// KnownGILs is how many processes' GILs the futex mechanism has found (and
// not forgotten). The GIL is learned only while the uprobes are attached
// (from a thread blocked in PyEval_RestoreThread); until then the
// tracepoints cannot tell that process's GIL waits from its other futex
// waits.
func (p *Probe) KnownGILs() (int, error) {
	var (
		pid uint32
		g   gilGilInfo
		n   int
	)
	it := p.objs.Gils.Iterate()
	for it.Next(&pid, &g) {
		n++
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("gil: read learned GILs: %w", err)
	}
	return n, nil
}

// SetDataRange tells the futex mechanism where pid's GIL can be: the
// interpreter file's writable data (WritableRange). Until the GIL is known,
// a futex wait of any of pid's threads in [lo, hi) is checked as one on the
// GIL, so that it is learned while the uprobes are detached too, from
// threads they never saw.
func (p *Probe) SetDataRange(pid uint32, lo, hi uint64) error {
	if err := p.objs.DataRanges.Put(pid, gilDataRange{Lo: lo, Hi: hi}); err != nil {
		return fmt.Errorf("gil: data range of pid %d: %w", pid, err)
	}
	return nil
}

// Select adds pid to the processes probed when Options.FilterPIDs is set.
func (p *Probe) Select(pid uint32) error {
	if err := p.objs.Pids.Put(pid, uint8(1)); err != nil {
		return fmt.Errorf("gil: select pid %d: %w", pid, err)
	}
	return nil
}

// Counters returns the kernel-side counters, summed over CPUs.
func (p *Probe) Counters() (Counters, error) {
	var c Counters
	read := func(i uint32) (uint64, error) {
		var perCPU []uint64
		if err := p.objs.Counters.Lookup(i, &perCPU); err != nil {
			return 0, fmt.Errorf("gil: read counter %d: %w", i, err)
		}
		var sum uint64
		for _, v := range perCPU {
			sum += v
		}
		return sum, nil
	}
	var err error
	if c.RingBufferFull, err = read(0); err != nil {
		return c, err
	}
	if c.AggregateMapFull, err = read(1); err != nil {
		return c, err
	}
	if c.Stale, err = read(2); err != nil {
		return c, err
	}
	if c.Hits, err = read(3); err != nil {
		return c, err
	}
	return c, nil
}

// ProgramStats is how often one BPF program ran and for how long in all,
// as the kernel counts it while EnableProgramStats is in effect.
type ProgramStats struct {
	Runs    uint64
	RunTime time.Duration
}

// EnableProgramStats makes the kernel count the run time of every BPF
// program (kernel.bpf_stats_enabled) until the returned closer is closed;
// it costs two clock reads per program run, so only benchmarks use it.
func EnableProgramStats() (io.Closer, error) {
	return ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
}

// ProgramStats returns the kernel's run counts and times of the entry and
// return programs (uprobe-multi and single-link variants summed), for the
// benchmark's share of each probe in a release cycle's cost.
func (p *Probe) ProgramStats() (entry, ret ProgramStats, err error) {
	progs := &p.objs.gilPrograms
	add := func(into *ProgramStats, ps ...*ebpf.Program) {
		for _, prog := range ps {
			st, e := prog.Stats()
			if e != nil {
				err = errors.Join(err, e)
				continue
			}
			into.Runs += st.RunCount
			into.RunTime += st.Runtime
		}
	}
	add(&entry, progs.EntryMulti, progs.EntrySingle)
	add(&ret, progs.ReturnMulti, progs.ReturnSingle)
	return entry, ret, err
}
