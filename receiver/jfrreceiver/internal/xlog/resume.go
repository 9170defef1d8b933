package xlog

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"go.uber.org/zap"
)

// Position is where the tail of one file stands: enough for a later run
// to go on from there, in the same file or, when the file was rotated
// meanwhile, in the file it was renamed to.
type Position struct {
	// Dev and Ino identify the file being read (it may be a rotated one
	// still being read to its end).
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
	// Offset is where the next line starts: a line read in part is read
	// again whole.
	Offset int64 `json:"offset"`
	// Head is a hash of the file's first HeadLen bytes (at most
	// headBytes): a file deleted and created again may get the same
	// inode, and is then told apart by its start.
	Head    uint64 `json:"head,omitempty"`
	HeadLen int    `json:"head_len,omitempty"`
	// Skipping: Offset lies inside a line longer than maxLine, dropped up
	// to its newline.
	Skipping bool `json:"skipping,omitempty"`
	// What the lines read so far told, which later lines need: the
	// collector's name and the bounds on the JVM's start.
	Collector string `json:"collector,omitempty"`
	StartLow  int64  `json:"start_low,omitempty"`
	StartHigh int64  `json:"start_high,omitempty"`
}

// maxChain bounds the rotated files read, after the one a position names,
// before the file under its name: more rotations than that while the
// collector was down lose the oldest of them.
const maxChain = 16

// headBytes is how much of a file's start Position.Head covers.
const headBytes = 256

// headOf hashes the first n bytes of f (fewer when it is shorter).
func headOf(f *os.File, n int) (uint64, int) {
	buf := make([]byte, n)
	m, _ := f.ReadAt(buf, 0)
	h := fnv.New64a()
	h.Write(buf[:m])
	return h.Sum64(), m
}

// sameHead says whether f starts as pos says its file did.
func sameHead(f *os.File, pos Position) bool {
	if pos.HeadLen == 0 {
		return true
	}
	h, n := headOf(f, pos.HeadLen)
	return n == pos.HeadLen && h == pos.Head
}

// Positions returns where the tail of every followed file stood at the end
// of its last read, by the path it is reported under: as many as the
// bounds on followed files allow. A file not read yet, or with none open,
// is left out. It touches no file: a read still running is not waited
// for.
func (s *Source) Positions() map[string]Position {
	out := make(map[string]Position, len(s.files))
	for p, t := range s.files {
		if t.hasPos && !t.gone {
			out[p] = t.pos
		}
	}
	return out
}

// position is where the tail stands now, in the read's goroutine.
func (t *tail) position() Position {
	return Position{Dev: t.dev, Ino: t.ino, Offset: t.offset, Skipping: t.skipping,
		Head: t.head, HeadLen: t.headLen, Collector: t.collector, StartLow: t.startLow, StartHigh: t.startHigh}
}

func identity(fi os.FileInfo) (dev, ino uint64) {
	if fi == nil {
		return 0, 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Dev, st.Ino
	}
	return 0, 0
}

// resume opens the file at pos, saved by an earlier run: the file under
// the name when it is still the same one, else the rotated file in the
// same folder that is (read from pos on), followed by the files rotated
// after it (read whole) and then the file under the name (read whole, by
// poll's rotation check). A position whose file is gone altogether (it
// was rotated out of the folder or deleted) reads the file under the name
// from its start: what the lost file held after the offset is missed.
func (t *tail) resume(pos Position, logger *zap.Logger) error {
	fi, err := t.root.Stat(t.name)
	if err != nil {
		return fmt.Errorf("xlog: %w", err)
	}
	if dev, ino := identity(fi); dev == pos.Dev && ino == pos.Ino {
		if err := t.open(true); err != nil {
			return err
		}
		if fi.Size() < pos.Offset || !sameHead(t.file, pos) {
			// Truncated meanwhile, or another file under a reused inode:
			// all of it is new.
			t.restore(pos, false)
			return nil
		}
		return t.seek(pos)
	}
	rotated, chain := t.rotatedSince(pos, fi)
	if rotated == nil {
		logger.Info("the -Xlog file read before the restart is gone: reading the file under its name from its start",
			zap.String("file", t.path))
		t.restore(pos, false)
		return t.open(true)
	}
	t.file, t.dev, t.ino, t.offset = rotated, pos.Dev, pos.Ino, 0
	t.headLen = 0
	t.skipping = false
	t.chain = chain
	logger.Debug("resuming a rotated -Xlog file", zap.String("file", t.path), zap.String("rotated", rotated.Name()), zap.Int("after", len(chain)))
	return t.seek(pos)
}

// restore takes back what earlier lines told.
func (t *tail) restore(pos Position, skipping bool) {
	t.collector, t.startLow, t.startHigh = pos.Collector, pos.StartLow, pos.StartHigh
	t.skipping = skipping
}

func (t *tail) seek(pos Position) error {
	t.offset = pos.Offset
	t.restore(pos, pos.Skipping)
	return nil
}

// rotatedSince finds, among the files rotated from the name (see
// siblings), the one pos names, opened, and the others renamed after it
// (rotatedAfter). The file under the name (current) is never one of them.
func (t *tail) rotatedSince(pos Position, current os.FileInfo) (*os.File, []*os.File) {
	files := t.siblings()
	for _, c := range files {
		if c.dev != pos.Dev || c.ino != pos.Ino {
			continue
		}
		f, err := t.root.OpenFile(c.name) // regular files only
		if err != nil {
			continue
		}
		if !sameFile(statOr(f, nil), pos.Dev, pos.Ino) || !sameHead(f, pos) {
			f.Close()
			continue
		}
		return f, t.after(files, c.mtime, pos.Dev, pos.Ino, current)
	}
	return nil, nil
}

// sibling is a file of the name's folder that may be one rotated from it.
type sibling struct {
	mtime    int64
	name     string
	dev, ino uint64
}

// siblings lists the regular files of the name's folder whose names begin
// with the name's (gc.log.0, gc.log.1, gc.log-20260101, as HotSpot and
// logrotate rename), not the name itself, oldest first. At most maxListed
// entries of the folder are looked at; none is opened.
func (t *tail) siblings() []sibling {
	dir, base := filepath.Dir(t.name), filepath.Base(t.name)
	names, _ := list(t.root, dir)
	var out []sibling
	for _, n := range names {
		if n == base || !strings.HasPrefix(n, base) {
			continue
		}
		name := filepath.Join(dir, n)
		fi, err := t.root.Stat(name)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		dev, ino := identity(fi)
		out = append(out, sibling{fi.ModTime().UnixNano(), name, dev, ino})
	}
	slices.SortFunc(out, func(a, b sibling) int {
		return cmp.Or(cmp.Compare(a.mtime, b.mtime), strings.Compare(a.name, b.name))
	})
	return out
}

// rotatedAfter opens the files renamed from the name after the file being
// read was (two rotations between polls, or one while a restart read the
// files rotated during the downtime), oldest first, at most maxChain. The
// file under the name (current) is not one of them.
func (t *tail) rotatedAfter(current os.FileInfo) []*os.File {
	fi, err := t.file.Stat()
	if err != nil {
		return nil
	}
	return t.after(t.siblings(), fi.ModTime().UnixNano(), t.dev, t.ino, current)
}

// after opens the files of files last written at or after since, other
// than the file (dev, ino) that was written until since, the current file
// under the name and the files this tail read last (a file finished
// within the same clock tick as the next one has its mtime).
func (t *tail) after(files []sibling, since int64, dev, ino uint64, current os.FileInfo) []*os.File {
	curDev, curIno := identity(current)
	var chain []*os.File
	for _, c := range files {
		switch {
		case c.mtime < since,
			c.dev == dev && c.ino == ino,
			c.dev == curDev && c.ino == curIno, // the current file, or a hard link to it
			t.wasRead(c.dev, c.ino):
			continue
		}
		if len(chain) == maxChain {
			break
		}
		f, err := t.root.OpenFile(c.name)
		if err != nil {
			continue
		}
		if !sameFile(statOr(f, nil), c.dev, c.ino) { // renamed over meanwhile
			f.Close()
			continue
		}
		chain = append(chain, f)
	}
	return chain
}

// readDone records the file being read as read to its end, so that it is
// never taken for a later rotation.
func (t *tail) readDone() {
	copy(t.lastRead[1:], t.lastRead[:len(t.lastRead)-1])
	t.lastRead[0] = fileKey{t.dev, t.ino}
}

func (t *tail) wasRead(dev, ino uint64) bool {
	return slices.Contains(t.lastRead[:], fileKey{dev, ino})
}

// fileKey identifies a file.
type fileKey struct{ dev, ino uint64 }

// statOr returns f's FileInfo, or fi when f cannot say.
func statOr(f *os.File, fi os.FileInfo) os.FileInfo {
	if st, err := f.Stat(); err == nil {
		return st
	}
	return fi
}

// next goes on to the next rotated file of the chain, read whole.
func (t *tail) next() error {
	t.readDone()
	t.file.Close()
	f := t.chain[0]
	t.chain = t.chain[1:]
	_, err := t.adopt(f)
	return err
}

func (t *tail) closeChain() {
	for _, f := range t.chain {
		f.Close()
	}
	t.chain = nil
}

func sameFile(fi os.FileInfo, dev, ino uint64) bool {
	d, i := identity(fi)
	return d == dev && i == ino
}
