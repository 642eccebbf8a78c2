// Package gctune sets the garbage collector's target for the long-running commands.
package gctune

import "runtime/debug"

// Percent is the GOGC the gateway runs with when the environment does not set one.
//
// A request leaves some 30 KB of short-lived garbage over a live heap of a few megabytes, so
// at Go's default of 100 the collector ran dozens of times a second and, with the allocation
// assists it imposes, took about a fifth of a replay's CPU (docs/PERFORMANCE.md). At 400 the
// heap peaks at five times the live set: tens of megabytes, not hundreds.
const Percent = 400

// Apply sets Percent unless GOGC is set, and returns the GOGC in force (-1: off).
func Apply(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		p := debug.SetGCPercent(100) // read the environment's value back …
		debug.SetGCPercent(p)        // … and leave it as it was
		return p
	}
	debug.SetGCPercent(Percent)
	return Percent
}
