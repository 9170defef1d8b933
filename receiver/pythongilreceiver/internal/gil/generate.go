package gil

// The BPF objects (gil_x86_bpfel.o, gil_arm64_bpfel.o) and their Go bindings
// are generated and committed, so that building needs no clang. Regenerate
// after editing gil.bpf.c with `make generate` (or `go generate
// ./receiver/pythongilreceiver/...`), which needs clang, llvm-strip,
// libbpf-dev's headers and the kernel's asm headers of each architecture:
// linux-libc-dev for amd64 (/usr/include/x86_64-linux-gnu) and
// linux-libc-dev-arm64-cross for arm64 (/usr/aarch64-linux-gnu/include).
// bpf2go defines __TARGET_ARCH_x86 or __TARGET_ARCH_arm64 itself, which
// selects PT_REGS_PARM* in bpf_tracing.h.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -tags linux -target amd64 -type event -type thread -type agg_value -type control gil gil.bpf.c -- -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -tags linux -target arm64 -type event -type thread -type agg_value -type control gil gil.bpf.c -- -I/usr/aarch64-linux-gnu/include -O2 -g -Wall -Werror
