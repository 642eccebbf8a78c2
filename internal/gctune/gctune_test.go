package gctune

import (
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	if got := Apply(func(string) string { return "" }); got != Percent {
		t.Fatalf("unset GOGC: applied %d, want %d", got, Percent)
	}
	if got := debug.SetGCPercent(250); got != Percent {
		t.Fatalf("unset GOGC: runtime has %d, want %d", got, Percent)
	}
	// The environment's own setting (here 250, as the runtime read it) is left alone.
	if got := Apply(func(string) string { return "250" }); got != 250 {
		t.Fatalf("GOGC=250: reported %d", got)
	}
	if got := debug.SetGCPercent(100); got != 250 {
		t.Fatalf("GOGC=250: runtime has %d, want it untouched", got)
	}
}
