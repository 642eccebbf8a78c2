package main

import (
	"fmt"
	"time"
)

// durationEnv reads the environment variable name as a duration (5s, 1m30s), def when it is
// unset: the default of a duration flag that the environment may set.
func durationEnv(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", name, v, err)
	}
	return d, nil
}
