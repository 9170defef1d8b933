package jfrprint

import (
	"math"
	"strconv"
	"strings"
)

// appendJavaDuration appends seconds+nanos formatted the way
// java.time.Duration.toString does ("PT0.006123962S", "PT1H2M3S",
// "PT-0.5S").
func appendJavaDuration(b []byte, seconds int64, nanos int32) []byte {
	if seconds == 0 && nanos == 0 {
		return append(b, "PT0S"...)
	}
	eff := seconds
	if seconds < 0 && nanos > 0 {
		eff++
	}
	hours := eff / 3600
	minutes := (eff % 3600) / 60
	secs := eff % 60
	b = append(b, "PT"...)
	if hours != 0 {
		b = strconv.AppendInt(b, hours, 10)
		b = append(b, 'H')
	}
	if minutes != 0 {
		b = strconv.AppendInt(b, minutes, 10)
		b = append(b, 'M')
	}
	if secs == 0 && nanos == 0 && (hours != 0 || minutes != 0) {
		return b
	}
	if seconds < 0 && nanos > 0 && secs == 0 {
		b = append(b, "-0"...)
	} else {
		b = strconv.AppendInt(b, secs, 10)
	}
	if nanos > 0 {
		var frac int64
		if seconds < 0 {
			frac = 2*1_000_000_000 - int64(nanos)
		} else {
			frac = int64(nanos) + 1_000_000_000
		}
		// frac has ten digits, the first a 1: the nine after it are the
		// fraction, printed without trailing zeros.
		for frac%10 == 0 {
			frac /= 10
		}
		at := len(b)
		b = strconv.AppendInt(b, frac, 10)
		b[at] = '.'
	}
	return append(b, 'S')
}

// durationOfNanos is java.time.Duration.ofNanos.
func durationOfNanos(ns int64) (int64, int32) {
	s := ns / 1_000_000_000
	n := ns % 1_000_000_000
	if n < 0 {
		n += 1_000_000_000
		s--
	}
	return s, int32(n)
}

// appendJavaOffsetDateTime appends an instant (epoch seconds + nanos) at
// a UTC offset formatted the way java.time.OffsetDateTime.toString does.
func appendJavaOffsetDateTime(b []byte, epochSec int64, nanos int32, offsetSec int64) []byte {
	local := epochSec + offsetSec
	days := floorDiv(local, 86400)
	sod := local - days*86400
	y, m, d := civilFromDays(days)
	switch {
	case y > 9999:
		b = append(b, '+')
		b = strconv.AppendInt(b, y, 10)
	case y < 0:
		b = append(b, '-')
		b = appendPadded(b, -y, 4)
	default:
		b = appendPadded(b, y, 4)
	}
	b = append(b, '-')
	b = appendPadded(b, m, 2)
	b = append(b, '-')
	b = appendPadded(b, d, 2)
	b = append(b, 'T')
	h, mi, s := sod/3600, sod/60%60, sod%60
	b = appendPadded(b, h, 2)
	b = append(b, ':')
	b = appendPadded(b, mi, 2)
	if s > 0 || nanos > 0 {
		b = append(b, ':')
		b = appendPadded(b, s, 2)
		if nanos > 0 {
			b = append(b, '.')
			switch {
			case nanos%1_000_000 == 0:
				b = appendPadded(b, int64(nanos/1_000_000), 3)
			case nanos%1000 == 0:
				b = appendPadded(b, int64(nanos/1000), 6)
			default:
				b = appendPadded(b, int64(nanos), 9)
			}
		}
	}
	if offsetSec == 0 {
		return append(b, 'Z')
	}
	o := offsetSec
	if o < 0 {
		b = append(b, '-')
		o = -o
	} else {
		b = append(b, '+')
	}
	b = appendPadded(b, o/3600, 2)
	b = append(b, ':')
	b = appendPadded(b, o/60%60, 2)
	if o%60 != 0 {
		b = append(b, ':')
		b = appendPadded(b, o%60, 2)
	}
	return b
}

// appendPadded appends v (not negative) with leading zeros to width digits.
func appendPadded(b []byte, v int64, width int) []byte {
	digits := 1
	for x := v; x >= 10; x /= 10 {
		digits++
	}
	for ; digits < width; digits++ {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, v, 10)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// civilFromDays converts days since 1970-01-01 to a proleptic Gregorian
// date (Howard Hinnant's algorithm).
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// javaDouble formats a float the way Double.toString (bits 64) or
// Float.toString (bits 32) does: plain decimal for 1e-3 <= |v| < 1e7,
// otherwise "d.dddE±n"; always at least one fractional digit. The digits
// are the shortest that round-trip, as in JDK 19 and later.
func javaDouble(v float64, bits int) string {
	if v == 0 {
		if math.Signbit(v) {
			return "-0.0"
		}
		return "0.0"
	}
	abs := math.Abs(v)
	if abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(v, 'f', -1, bits)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(v, 'e', -1, bits) // d.ddde±XX
	mant, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

// appendJSONString appends s quoted and escaped like the JDK's JSON writer:
// it escapes '/', and every UTF-16 unit above 0x7F as \uXXXX.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	// Most strings (names, classes, descriptors) need no escape: copy the
	// leading run of such bytes at once.
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\' && s[i] != '/' {
		i++
	}
	b = append(b, s[:i]...)
	for _, r := range s[i:] {
		switch r {
		case '\b':
			b = append(b, `\b`...)
		case '\n':
			b = append(b, `\n`...)
		case '\t':
			b = append(b, `\t`...)
		case '\f':
			b = append(b, `\f`...)
		case '\r':
			b = append(b, `\r`...)
		case '"':
			b = append(b, `\"`...)
		case '\\':
			b = append(b, `\\`...)
		case '/':
			b = append(b, `\/`...)
		default:
			if r >= 32 && r <= 0x7F {
				b = append(b, byte(r))
				continue
			}
			if r > 0xFFFF {
				r -= 0x10000
				b = appendU(b, 0xD800+(r>>10))
				b = appendU(b, 0xDC00+(r&0x3FF))
				continue
			}
			b = appendU(b, r)
		}
	}
	return append(b, '"')
}

func appendU(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&0xF], hex[r>>8&0xF], hex[r>>4&0xF], hex[r&0xF])
}
