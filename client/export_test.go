package client

import (
	"context"
	"time"
)

// WithPause replaces how the client waits between tries, so that a test sees every wait the
// client asks for, and may skip it.
func WithPause(f func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.pause = f }
}

// Sleep is the client's own wait.
var Sleep = sleep
