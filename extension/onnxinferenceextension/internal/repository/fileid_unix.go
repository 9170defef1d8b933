//go:build unix

package repository // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/repository"

import (
	"os"
	"syscall"
)

// fileID returns the device and inode numbers of the file info describes,
// which tell a file renamed into place from the one it replaced even when
// both have the same size and modification time.
func fileID(info os.FileInfo) (dev, ino uint64) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino) //nolint:unconvert // int32 on some platforms
	}
	return 0, 0
}
