package gil

import (
	"debug/elf"
	"encoding/binary"
	"fmt"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"
)

// flow is what the search needs of one machine instruction: how control
// leaves it.
type flow uint8

const (
	flowNext   flow = iota // falls through to the next instruction
	flowCall               // direct call of target, then falls through
	flowJump               // direct jump to target, no fall-through
	flowBranch             // conditional direct jump to target, or falls through
	flowReturn             // returns to the caller
	flowStop               // control leaves by a way not followed (indirect jump, trap)
)

// insn is one decoded instruction.
type insn struct {
	len    int
	flow   flow
	target uint64
	// slot is the address of the pointer an indirect call or jump goes
	// through (x86-64 RIP-relative only), 0 for others.
	slot uint64
	// arg2 is set when the instruction writes the second integer argument
	// register (rsi/esi, x1/w1); arg2Const then says whether the value is
	// the constant arg2Value.
	arg2      bool
	arg2Const bool
	arg2Value int64
	// padding marks alignment filler (nop, int3) that a compiler puts
	// after a function's last instruction.
	padding bool
}

// decoder decodes one instruction of code at address pc.
type decoder func(code []byte, pc uint64) (insn, error)

// maxInsnLen is the longest instruction of either architecture.
const maxInsnLen = 15

func decoderFor(m elf.Machine) (decoder, error) {
	switch m {
	case elf.EM_X86_64:
		return decodeX86, nil
	case elf.EM_AARCH64:
		return decodeARM64, nil
	}
	return nil, fmt.Errorf("%w: machine %s has no decoder", ErrNotDecoded, m)
}

func decodeX86(code []byte, pc uint64) (insn, error) {
	in, err := x86asm.Decode(code, 64)
	if err != nil {
		return insn{}, err
	}
	out := insn{len: in.Len}
	next := pc + uint64(in.Len)
	switch in.Op {
	case x86asm.CALL, x86asm.JMP:
		out.flow = flowStop
		if in.Op == x86asm.CALL {
			// An indirect call returns like a direct one.
			out.flow = flowNext
		}
		switch a := in.Args[0].(type) {
		case x86asm.Rel:
			out.target = next + uint64(int64(a))
			out.flow = flowJump
			if in.Op == x86asm.CALL {
				out.flow = flowCall
			}
		case x86asm.Mem:
			if a.Base == x86asm.RIP && a.Index == 0 {
				out.slot = next + uint64(a.Disp)
			}
		}
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JG, x86asm.JGE, x86asm.JL,
		x86asm.JLE, x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JS,
		x86asm.JCXZ, x86asm.JECXZ, x86asm.JRCXZ, x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		out.flow = flowNext
		if a, ok := in.Args[0].(x86asm.Rel); ok {
			out.flow, out.target = flowBranch, next+uint64(int64(a))
		}
	case x86asm.RET, x86asm.LRET, x86asm.IRET, x86asm.IRETD, x86asm.IRETQ:
		out.flow = flowReturn
	case x86asm.UD0, x86asm.UD1, x86asm.UD2, x86asm.HLT:
		out.flow = flowStop
	case x86asm.INT:
		out.flow, out.padding = flowStop, len(code) > 0 && code[0] == 0xcc
	case x86asm.NOP:
		// endbr64 (f3 0f 1e fa) decodes as a hint nop; it opens functions,
		// it does not pad them.
		out.padding = !(in.Len == 4 && binary.BigEndian.Uint32(code) == 0xf30f1efa)
	case x86asm.MOV, x86asm.XOR, x86asm.LEA, x86asm.MOVZX, x86asm.MOVSXD, x86asm.MOVSX, x86asm.ADD, x86asm.SUB,
		x86asm.AND, x86asm.OR, x86asm.POP, x86asm.CMOVA, x86asm.CMOVAE, x86asm.CMOVB, x86asm.CMOVBE, x86asm.CMOVE,
		x86asm.CMOVG, x86asm.CMOVGE, x86asm.CMOVL, x86asm.CMOVLE, x86asm.CMOVNE, x86asm.CMOVNS, x86asm.CMOVS,
		x86asm.SHL, x86asm.SHR, x86asm.SAR, x86asm.INC, x86asm.DEC, x86asm.NEG, x86asm.NOT, x86asm.IMUL, x86asm.XCHG:
		if r, ok := in.Args[0].(x86asm.Reg); ok && (r == x86asm.RSI || r == x86asm.ESI || r == x86asm.SI || r == x86asm.SIB) {
			out.arg2 = true
			if imm, ok := in.Args[1].(x86asm.Imm); ok && in.Op == x86asm.MOV {
				out.arg2Const, out.arg2Value = true, int64(imm)
			}
			if r2, ok := in.Args[1].(x86asm.Reg); ok && in.Op == x86asm.XOR && r2 == r {
				out.arg2Const, out.arg2Value = true, 0
			}
		}
	}
	return out, nil
}

func decodeARM64(code []byte, pc uint64) (insn, error) {
	if len(code) < 4 {
		return insn{}, fmt.Errorf("truncated instruction")
	}
	out := insn{len: 4}
	in, err := arm64asm.Decode(code[:4])
	if err != nil {
		// udf #0 and other permanently undefined encodings end a path.
		out.flow = flowStop
		return out, nil
	}
	pcrel := func(i int) (uint64, bool) {
		if i < len(in.Args) {
			if r, ok := in.Args[i].(arm64asm.PCRel); ok {
				return pc + uint64(int64(r)), true
			}
		}
		return 0, false
	}
	switch in.Op {
	case arm64asm.BL:
		if t, ok := pcrel(0); ok {
			out.flow, out.target = flowCall, t
		}
	case arm64asm.B:
		if t, ok := pcrel(0); ok {
			out.flow, out.target = flowJump, t
		} else if t, ok := pcrel(1); ok {
			// B.cond: the condition comes first.
			out.flow, out.target = flowBranch, t
		}
	case arm64asm.CBZ, arm64asm.CBNZ:
		if t, ok := pcrel(1); ok {
			out.flow, out.target = flowBranch, t
		}
	case arm64asm.TBZ, arm64asm.TBNZ:
		if t, ok := pcrel(2); ok {
			out.flow, out.target = flowBranch, t
		}
	case arm64asm.RET:
		out.flow = flowReturn
	case arm64asm.BR, arm64asm.BRK, arm64asm.HLT:
		out.flow = flowStop
	case arm64asm.NOP:
		out.padding = true
	default:
		// Writes of w1/x1 (the second argument): the destination comes
		// first in every data-processing instruction.
		if len(in.Args) > 0 && in.Args[0] != nil {
			if r, ok := in.Args[0].(arm64asm.Reg); ok && (r == arm64asm.W1 || r == arm64asm.X1) && isARM64Write(in.Op) {
				out.arg2 = true
				if in.Op == arm64asm.MOV {
					if imm, ok := arm64Imm(in.Args[1]); ok {
						out.arg2Const, out.arg2Value = true, imm
					}
				}
			}
		}
	}
	return out, nil
}

// isARM64Write reports whether op writes its first operand; stores and
// compares name registers first without writing them.
func isARM64Write(op arm64asm.Op) bool {
	switch op {
	case arm64asm.STR, arm64asm.STRB, arm64asm.STRH, arm64asm.STP, arm64asm.STUR, arm64asm.STURB, arm64asm.STURH,
		arm64asm.STLR, arm64asm.STLRB, arm64asm.STLRH, arm64asm.STXR, arm64asm.STLXR, arm64asm.CMP, arm64asm.CMN,
		arm64asm.TST, arm64asm.CBZ, arm64asm.CBNZ, arm64asm.TBZ, arm64asm.TBNZ, arm64asm.CCMP, arm64asm.CCMN,
		arm64asm.PRFM:
		return false
	}
	return true
}

// arm64Imm returns the value of an immediate operand of mov (movz with
// its shift applied, as the decoder gives it).
func arm64Imm(a arm64asm.Arg) (int64, bool) {
	switch v := a.(type) {
	case arm64asm.Imm:
		return int64(v.Imm), true
	case arm64asm.Imm64:
		return int64(v.Imm), true
	}
	return 0, false
}

// stubSlot returns the pointer a PLT stub at code jumps through: x86-64
// `[endbr64;] [bnd] jmp *slot(%rip)`; arm64 `[bti c;] adrp x16, page;
// ldr x17, [x16, #off]`. ok is false for anything else.
func stubSlot(m elf.Machine, code []byte, pc uint64) (uint64, bool) {
	switch m {
	case elf.EM_X86_64:
		if len(code) >= 4 && binary.BigEndian.Uint32(code) == 0xf30f1efa { // endbr64
			code, pc = code[4:], pc+4
		}
		in, err := decodeX86(code, pc)
		if err == nil && in.slot != 0 && in.flow == flowStop {
			return in.slot, true
		}
	case elf.EM_AARCH64:
		if len(code) >= 4 && binary.LittleEndian.Uint32(code) == 0xd503245f { // bti c
			code, pc = code[4:], pc+4
		}
		if len(code) < 8 {
			return 0, false
		}
		adrp, ldr := binary.LittleEndian.Uint32(code), binary.LittleEndian.Uint32(code[4:])
		// adrp x16: 1 immlo(2) 10000 immhi(19) Rd(5)
		if adrp&0x9f00001f != 0x90000010 {
			return 0, false
		}
		// ldr x17, [x16, #imm12*8]: 1111 1001 01 imm12 Rn Rt
		if ldr&0xffc003ff != 0xf9400211 {
			return 0, false
		}
		imm := int64(adrp>>29&3|(adrp>>5&0x7ffff)<<2) << 43 >> 31 // sign-extend 21 bits, times 4096
		page := (pc &^ 0xfff) + uint64(imm)
		return page + uint64(ldr>>10&0xfff)*8, true
	}
	return 0, false
}
