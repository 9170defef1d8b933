package procevents

// The BPF objects (procevents_x86_bpfel.o, procevents_arm64_bpfel.o) and their
// Go bindings are generated and committed, so that building needs no clang.
// Regenerate after editing procevents.bpf.c with `make generate` or
// `go generate ./internal/procevents/` (needs clang, llvm-strip and
// libbpf-dev's headers; the program reads no kernel structures, so one
// source builds for both architectures).
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -tags linux -target amd64,arm64 -type event procevents procevents.bpf.c -- -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
