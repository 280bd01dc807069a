//go:build !linux

package nftables

import "errors"

var errNotLinux = errors.New("nftables: only available on Linux")

// Apply makes the kernel hold exactly p; it needs Linux.
func Apply(p *Program, o Options) (Result, error) { return Result{}, errNotLinux }

// Cleanup deletes Skiff's tables; it needs Linux.
func Cleanup(o Options) ([]string, error) { return nil, errNotLinux }

// Present returns the names of Skiff's tables the kernel holds; it needs Linux.
func Present(o Options) ([]string, error) { return nil, errNotLinux }

// InSync reports whether the kernel holds exactly p; it needs Linux.
func InSync(p *Program, o Options) (bool, error) { return false, errNotLinux }

// Generation returns the kernel's nftables ruleset generation; it needs Linux.
func Generation(o Options) (uint32, error) { return 0, errNotLinux }
