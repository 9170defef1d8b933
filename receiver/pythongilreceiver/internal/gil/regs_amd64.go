//go:build linux

package gil

// ptRegs are the registers in the order of x86-64's struct pt_regs, where
// the BPF side reads them (usdt_arg).
var ptRegs = []string{"r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10",
	"r9", "r8", "rax", "rcx", "rdx", "rsi", "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss"}
