//go:build !race

package dnsproxy

const raceEnabled = false
