//go:build race

package export_test

// raceEnabled: the race detector instruments the pure-Go SQLite engine too, which then inserts
// and reads some ten times slower.
const raceEnabled = true
