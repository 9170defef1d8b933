// Package arm64smoke holds `make arm64-smoke`: the cross-built linux/arm64
// binary run under qemu-user-static (smoke_test.go, built with -tags
// arm64smoke).
package arm64smoke
