package nvmlreceiver

import (
	"errors"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// defaultLibraryName is what go-nvml dlopens when library_path is empty.
const defaultLibraryName = "libnvidia-ml.so.1"

// openLibrary creates (without initialising) the NVML binding for a library
// path; "" means the dynamic loader's search path. Tests replace it.
type openLibrary func(path string) nvml.Interface

func openSystemLibrary(path string) nvml.Interface {
	if path == "" {
		return nvml.New()
	}
	return nvml.New(nvml.WithLibraryPath(path))
}

// libraries holds the process's NVML handles. nvmlInit/nvmlShutdown are
// process-wide, and several receiver instances (or one receiver restarted
// by a config reload) may use the same library, so each path is initialised
// once and shut down when its last user releases it.
var libraries = &libraryRegistry{entries: map[string]*libraryEntry{}}

type libraryRegistry struct {
	mu      sync.Mutex
	entries map[string]*libraryEntry
}

type libraryEntry struct {
	lib  nvml.Interface
	refs int
}

// InitError says why NVML could not be initialised; Return is NVML's code.
type InitError struct {
	Path   string
	Return nvml.Return
}

// Error says which library failed, NVML's code and what it usually means.
func (e *InitError) Error() string {
	return fmt.Sprintf("nvml: init %s: %s: %s", libraryName(e.Path), nvmlReturnName(e.Return), initHint(e.Return))
}

// LibraryMissing reports whether the library itself could not be loaded (no
// driver installed, or not mounted into the container).
func (e *InitError) LibraryMissing() bool { return e.Return == nvml.ERROR_LIBRARY_NOT_FOUND }

func libraryName(path string) string {
	if path == "" {
		return defaultLibraryName
	}
	return path
}

func initHint(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "the NVIDIA driver's libnvidia-ml.so.1 is not installed on this host or not mounted into the collector's container (NVIDIA container toolkit, or a hostPath mount plus library_path)"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "the library is present but the NVIDIA kernel driver is not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "the collector may not open /dev/nvidia* (device nodes not mounted or not readable)"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "the user-space library and the kernel driver have different versions (driver upgraded without reboot, or the wrong library mounted)"
	default:
		return "NVML could not be initialised"
	}
}

// nvmlReturnName spells a return code without needing the library loaded.
func nvmlReturnName(ret nvml.Return) string {
	return ret.Error()
}

// acquire returns the initialised library for path, initialising it on first
// use. Every successful acquire must be paired with one release.
func (r *libraryRegistry) acquire(path string, open openLibrary) (nvml.Interface, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[path]; ok {
		e.refs++
		return e.lib, nil
	}
	lib := open(path)
	if lib == nil {
		return nil, errors.New("nvml: no binding for " + libraryName(path))
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, &InitError{Path: path, Return: ret}
	}
	r.entries[path] = &libraryEntry{lib: lib, refs: 1}
	return lib, nil
}

// release drops one reference and shuts the library down with the last.
func (r *libraryRegistry) release(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[path]
	if !ok {
		return nil
	}
	e.refs--
	if e.refs > 0 {
		return nil
	}
	delete(r.entries, path)
	if ret := e.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml: shutdown %s: %s", libraryName(path), nvmlReturnName(ret))
	}
	return nil
}

// refs returns the reference count of path (for tests).
func (r *libraryRegistry) refs(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[path]; ok {
		return e.refs
	}
	return 0
}
