package procresource

import (
	"strconv"
	"strings"

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
	uid, gid = -1, -1
	for line := range strings.SplitSeq(string(status), "\n") {
		key, rest, ok := strings.Cut(line, ":")
		if !ok || (key != "Uid" && key != "Gid") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.Atoi(f[1])
		if err != nil || v < 0 {
			continue
		}
		if key == "Uid" {
			uid = v
		} else {
			gid = v
		}
	}
	return uid, gid
}
