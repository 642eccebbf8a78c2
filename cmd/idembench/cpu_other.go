//go:build !unix

package main

import "time"

// processCPU is not measured off unix.
func processCPU() time.Duration { return 0 }
