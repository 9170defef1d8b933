package nvmlreceiver

// xidMeanings describes the XID codes operators most often meet on
// inference nodes, in NVIDIA's terms, shortened. Codes not listed are
// reported as "unknown XID" with their number.
var xidMeanings = map[uint64]string{
	8:   "GPU stopped processing (timeout)",
	13:  "graphics engine exception (often an illegal memory access by an application)",
	31:  "GPU memory page fault (an application accessed an invalid address)",
	32:  "invalid or corrupted push buffer stream",
	38:  "driver firmware error",
	43:  "GPU stopped processing (an application hit a fatal fault)",
	45:  "preemptive cleanup, after a previous error or an application being killed",
	48:  "double-bit ECC error (uncorrectable)",
	56:  "display engine error",
	61:  "internal micro-controller breakpoint or warning",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping recorded",
	64:  "ECC page retirement or row remapping failed",
	68:  "video processor exception",
	69:  "graphics engine class error",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error (the application that hit it must restart)",
	95:  "uncontained ECC error (the GPU must be reset)",
	109: "context switch timeout",
	119: "GSP firmware RPC timeout",
	120: "GSP firmware error",
	121: "C2C link error",
}

// xidDescription returns what an XID code means.
func xidDescription(code uint64) string {
	if s, ok := xidMeanings[code]; ok {
		return s
	}
	return "unknown XID"
}
