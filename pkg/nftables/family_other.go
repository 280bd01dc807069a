//go:build !linux

package nftables

// FamilyInUse is only known on Linux.
func FamilyInUse(Options, bool) (bool, error) { return true, errNotLinux }
