//go:build !unix

package repository // import "github.com/otelcol-ai/otelcol-ai/extension/onnxinferenceextension/internal/repository"

import "os"

// fileID returns zeros where the platform has no inode numbers: a change is
// then seen by size and modification time only.
func fileID(os.FileInfo) (dev, ino uint64) { return 0, 0 }
