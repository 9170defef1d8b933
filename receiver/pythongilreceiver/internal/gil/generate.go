package gil

// The BPF objects (gil_x86_bpfel.o) and their Go bindings are generated and
// committed, so that building needs no clang. Regenerate after editing
// gil.bpf.c with `go generate ./receiver/pythongilreceiver/...` (needs clang,
// llvm-strip and libbpf-dev's headers).
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -tags linux -target amd64 -type event -type agg_key -type agg_value -type control gil gil.bpf.c -- -I/usr/include/x86_64-linux-gnu -D__TARGET_ARCH_x86 -O2 -g -Wall -Werror
