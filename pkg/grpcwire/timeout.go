package grpcwire

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// timeoutUnits are grpc-timeout's units from the finest up.
var timeoutUnits = [...]struct {
	unit byte
	d    time.Duration
}{
	{'n', time.Nanosecond},
	{'u', time.Microsecond},
	{'m', time.Millisecond},
	{'S', time.Second},
	{'M', time.Minute},
	{'H', time.Hour},
}

// maxTimeoutValue is the largest grpc-timeout value: at most 8 digits.
const maxTimeoutValue = 99999999

// encodeTimeout formats d as a grpc-timeout value in the finest unit that
// holds it in 8 digits, rounding up so the server never sees a deadline
// earlier than the client's. d must be positive.
func encodeTimeout(d time.Duration) string {
	for _, u := range timeoutUnits {
		v := d / u.d
		if d%u.d != 0 {
			v++
		}
		if v <= maxTimeoutValue {
			return strconv.FormatInt(int64(v), 10) + string(u.unit)
		}
	}
	return strconv.Itoa(maxTimeoutValue) + "H"
}

// ParseTimeout reads a grpc-timeout value. A value too large for a
// time.Duration is the largest Duration.
func ParseTimeout(s string) (time.Duration, error) {
	if len(s) < 2 || len(s) > 9 {
		return 0, fmt.Errorf("malformed grpc-timeout %q", s)
	}
	digits, unit := s[:len(s)-1], s[len(s)-1]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, fmt.Errorf("malformed grpc-timeout %q", s)
		}
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed grpc-timeout %q", s)
	}
	for _, u := range timeoutUnits {
		if u.unit == unit {
			if v > int64(math.MaxInt64/u.d) {
				return math.MaxInt64, nil
			}
			return time.Duration(v) * u.d, nil
		}
	}
	return 0, fmt.Errorf("malformed grpc-timeout %q: unit %q", s, unit)
}
