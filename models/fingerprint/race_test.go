//go:build race

package fingerprint

const raceEnabled = true
