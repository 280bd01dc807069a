package promtext

import (
	"math"
	"strconv"
)

// appendEscaped appends s escaped as the format wants: backslash and newline
// in help text, and also the double quote in label values (quote true).
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat appends f as Prometheus writes a value: +Inf, -Inf, NaN, and
// otherwise the shortest 'g' form that reads back as f (1e+06, 0.0005, 2.5).
// Zero is "0" whatever its sign.
func appendFloat(b []byte, f float64) []byte {
	switch {
	case f == 0:
		return append(b, '0')
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// appendSample appends one line: name+suffix, the labels (with le when
// le is set), and v.
func appendSample(b []byte, name, suffix, labels string, le *float64, v float64) []byte {
	b = append(b, name...)
	b = append(b, suffix...)
	if labels != "" || le != nil {
		b = append(b, '{')
		b = append(b, labels...)
		if le != nil {
			if labels != "" {
				b = append(b, ',')
			}
			b = append(b, `le="`...)
			b = appendFloat(b, *le)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, ' ')
	b = appendFloat(b, v)
	return append(b, '\n')
}
