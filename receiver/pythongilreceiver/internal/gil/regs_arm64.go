//go:build linux

package gil

// ptRegs are the registers in the order of arm64's user_pt_regs (x0-x30,
// sp, pc, pstate), where the BPF side reads them (usdt_arg). The USDT
// argument parser reads x86-64 operands only, so on arm64 a library's USDT
// GC probes are refused with ErrUnsupportedArg and GC pauses come from the
// symbol table alone.
var ptRegs = []string{"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10",
	"x11", "x12", "x13", "x14", "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23",
	"x24", "x25", "x26", "x27", "x28", "x29", "x30", "sp", "pc", "pstate"}
