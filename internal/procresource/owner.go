package procresource

import (
	"bytes"
	"strconv"

	"github.com/otelcol-ai/otelcol-ai/internal/procroot"
)

// Owner reads the effective uid and gid pid runs as, from its status file
// (the second of the Uid and Gid lines' real, effective, saved and
// filesystem ids). Either is -1 when its line is missing or cannot be
// parsed, as chown(2) takes -1 for an id to leave alone. It fails with
// ErrNoProcess (wrapped) when the process is gone.
func (r *Reader) Owner(pid int) (uid, gid int, err error) {
	data, err := procroot.ReadProcFile(r.path(pid, "status"), maxStatus)
	if err != nil {
		return -1, -1, r.processError(pid, "status", err)
	}
	uid, gid = parseOwner(data)
	return uid, gid, nil
}

// parseOwner returns the effective ids of a status file's Uid and Gid
// lines, -1 for one it cannot read.
func parseOwner(status []byte) (uid, gid int) {
	return effectiveID(status, "Uid"), effectiveID(status, "Gid")
}

// effectiveID is the second id of the status line key, -1 when there is
// none or it is not a number.
func effectiveID(status []byte, key string) int {
	value, ok := StatusField(status, key)
	if !ok {
		return -1
	}
	f := bytes.Fields(value)
	if len(f) < 2 {
		return -1
	}
	v, err := strconv.Atoi(string(f[1]))
	if err != nil || v < 0 {
		return -1
	}
	return v
}
