package xds

import "strconv"

func itoa[T ~uint64 | ~int](n T) string { return strconv.FormatUint(uint64(n), 10) }
