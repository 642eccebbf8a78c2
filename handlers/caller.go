package handlers

import (
	"context"
	"sync"

	"github.com/idemgate/idemgate/models"
	"golang.org/x/time/rate"
)

type callerKey struct{}

// WithCaller returns ctx carrying the authenticated API principal. The web layer's auth
// middleware sets it; handlers read it with CallerFrom.
func WithCaller(ctx context.Context, c *models.Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the API principal of the request; nil when unauthenticated.
func CallerFrom(ctx context.Context) *models.Caller {
	c, _ := ctx.Value(callerKey{}).(*models.Caller)
	return c
}

// RateLimiter holds one token bucket per principal.
type RateLimiter struct {
	limit rate.Limit
	burst int
	mu    sync.Mutex
	byID  map[string]*rate.Limiter
}

// NewRateLimiter allows each principal perSecond requests with bursts of burst; perSecond
// zero or less disables limiting.
func NewRateLimiter(perSecond float64, burst int) *RateLimiter {
	return &RateLimiter{limit: rate.Limit(perSecond), burst: burst, byID: map[string]*rate.Limiter{}}
}

// Allow spends a token of principal's bucket; false means the caller must wait.
func (r *RateLimiter) Allow(principal string) bool {
	if r == nil || r.limit <= 0 {
		return true
	}
	r.mu.Lock()
	l, ok := r.byID[principal]
	if !ok {
		l = rate.NewLimiter(r.limit, r.burst)
		r.byID[principal] = l
	}
	r.mu.Unlock()
	return l.Allow()
}
