package gil

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"slices"
)

// Function starts survive stripping: the unwinder needs them, so
// .eh_frame_hdr keeps a sorted table of the start address of every
// function's frame description (and of each part a compiler split off,
// such as take_gil.cold). A function found by decoding must start one.

// DWARF exception-header pointer encodings used by the table.
const (
	dwEHPEsdata4  = 0x0b
	dwEHPEudata4  = 0x03
	dwEHPEpcrel   = 0x10
	dwEHPEdatarel = 0x30
	dwEHPEomit    = 0xff
)

// maxFDEs bounds the table read (libpython has about 10,000 entries).
const maxFDEs = 1 << 20

// functionStarts reads the sorted start addresses of .eh_frame_hdr's
// table; nil when the file has none or its table is encoded otherwise
// than every linker writes it (4-byte values relative to the header).
func (rd *imageReader) functionStarts(f *elf.File) ([]uint64, error) {
	s := f.Section(".eh_frame_hdr")
	if s == nil || s.Type == elf.SHT_NOBITS || s.Size < 12 {
		return nil, nil
	}
	if err := rd.within(s.Name, s.Offset, 12); err != nil {
		return nil, err
	}
	var h [12]byte
	if _, err := rd.r.ReadAt(h[:], int64(s.Offset)); err != nil {
		return nil, &ELFError{Where: s.Name, Offset: s.Offset, Err: err}
	}
	// version, eh_frame_ptr_enc, fde_count_enc, table_enc, then the
	// eh_frame pointer and the count.
	if h[0] != 1 || h[2] != dwEHPEudata4 || h[3] != dwEHPEdatarel|dwEHPEsdata4 || h[1] == dwEHPEomit || h[1]&0x0f != dwEHPEsdata4 {
		return nil, nil
	}
	n := uint64(f.ByteOrder.Uint32(h[8:12]))
	if n > maxFDEs {
		return nil, &ELFError{Where: s.Name, Offset: s.Offset, Err: fmt.Errorf("%w: %d frame descriptions, at most %d", ErrLimit, n, maxFDEs)}
	}
	if 12+n*8 > s.Size {
		return nil, &ELFError{Where: s.Name, Offset: s.Offset, Err: fmt.Errorf("%w: %d frame descriptions in %d bytes", ErrMalformed, n, s.Size)}
	}
	if err := rd.within(s.Name, s.Offset+12, n*8); err != nil {
		return nil, err
	}
	if err := rd.charge(s.Name, s.Offset+12, n*8); err != nil {
		return nil, err
	}
	table := make([]byte, n*8)
	if _, err := rd.r.ReadAt(table, int64(s.Offset+12)); err != nil {
		return nil, &ELFError{Where: s.Name, Offset: s.Offset + 12, Err: err}
	}
	starts := make([]uint64, n)
	for i := range starts {
		starts[i] = s.Addr + uint64(int64(int32(binary.LittleEndian.Uint32(table[i*8:]))))
		if f.ByteOrder == binary.BigEndian {
			starts[i] = s.Addr + uint64(int64(int32(binary.BigEndian.Uint32(table[i*8:]))))
		}
	}
	if !slices.IsSorted(starts) {
		return nil, &ELFError{Where: s.Name, Offset: s.Offset, Err: fmt.Errorf("%w: frame description table not sorted", ErrMalformed)}
	}
	return starts, nil
}
