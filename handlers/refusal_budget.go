package handlers

import (
	"context"
	"log/slog"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// Refusals that anyone can cause (a failed or throttled sign-in, a form without its CSRF token,
// a request with a bad API key, a page the role forbids) are worth an audit entry, but a flood
// of them must not grow the chain, whose appends are serialised, without bound. RefusalBudget
// lets each client address record a few, and all addresses together a few more per second;
// what it drops is counted and recorded once, in one summary entry, after a while.

// RefusalLimits bound the refusals recorded in the audit log.
type RefusalLimits struct {
	// PerAddress refusals a second from one client address (an IPv6 address counts with its
	// /64), in bursts of PerAddressBurst: one client cannot use up the others' budget.
	PerAddress      rate.Limit
	PerAddressBurst int
	// Global refusals a second from all addresses together, in bursts of GlobalBurst: many
	// addresses cannot flood the chain either.
	Global      rate.Limit
	GlobalBurst int
	// SummaryAfter is how long after the first dropped refusal the summary of the dropped
	// ones is written: at most one summary entry per period, however long a flood lasts.
	SummaryAfter time.Duration
}

// DefaultRefusalLimits: one refusal a second per address in bursts of 20, twenty a second in
// all in bursts of 40, and a summary a minute after the first dropped one.
var DefaultRefusalLimits = RefusalLimits{PerAddress: 1, PerAddressBurst: 20, Global: 20, GlobalBurst: 40, SummaryAfter: time.Minute}

// maxAddresses bounds the addresses the budget remembers, and maxListedAddresses those a
// summary names (with the most dropped refusals).
const (
	maxAddresses       = 10000
	maxListedAddresses = 20
)

// RefusalBudget records refusals in the audit log within RefusalLimits. It is safe for
// concurrent use.
type RefusalBudget struct {
	ledger *models.Ledger
	log    *slog.Logger
	limits RefusalLimits

	mu       sync.Mutex
	global   *rate.Limiter
	perAddr  map[string]*addrBudget
	dropped  map[string]int // by action
	byAddr   map[string]int
	first    time.Time
	last     time.Time
	flushing bool
}

type addrBudget struct {
	lim  *rate.Limiter
	seen time.Time
}

// NewRefusalBudget returns a budget that records into l; zero limits take
// DefaultRefusalLimits.
func NewRefusalBudget(l *models.Ledger, log *slog.Logger, limits RefusalLimits) *RefusalBudget {
	if limits == (RefusalLimits{}) {
		limits = DefaultRefusalLimits
	}
	return &RefusalBudget{ledger: l, log: logger(log), limits: limits,
		global: rate.NewLimiter(limits.Global, limits.GlobalBurst), perAddr: map[string]*addrBudget{}}
}

// Record appends in, a refusal of the request c, to the audit log when the budget allows, and
// otherwise counts it for the summary.
func (b *RefusalBudget) Record(c echo.Context, in models.AuditInput) {
	if b == nil || b.ledger == nil {
		return
	}
	if b.allow(c.RealIP(), in.Action) {
		RecordRefusal(c, b.ledger, b.log, in)
	}
}

// allow takes a token from the address's budget and then the global one; without both, the
// refusal is counted as dropped.
func (b *RefusalBudget) allow(ip, action string) bool {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	key := addressKey(ip)
	ab := b.perAddr[key]
	if ab == nil {
		b.forgetIdle(now)
		ab = &addrBudget{lim: rate.NewLimiter(b.limits.PerAddress, b.limits.PerAddressBurst)}
		b.perAddr[key] = ab
	}
	ab.seen = now
	if ab.lim.AllowN(now, 1) && b.global.AllowN(now, 1) {
		return true
	}
	if b.dropped == nil {
		b.dropped, b.byAddr, b.first = map[string]int{}, map[string]int{}, now
	}
	b.dropped[action]++
	b.byAddr[key]++
	b.last = now
	if !b.flushing {
		b.flushing = true
		time.AfterFunc(b.limits.SummaryAfter, b.flush)
	}
	return false
}

// forgetIdle keeps the address map bounded: an address idle long enough to have its whole
// burst back is the same as a new one. Called with mu held, before adding an address.
func (b *RefusalBudget) forgetIdle(now time.Time) {
	if len(b.perAddr) < maxAddresses {
		return
	}
	refill := time.Duration(float64(b.limits.PerAddressBurst) / float64(b.limits.PerAddress) * float64(time.Second))
	for k, ab := range b.perAddr {
		if now.Sub(ab.seen) > refill {
			delete(b.perAddr, k)
		}
	}
	if len(b.perAddr) >= maxAddresses {
		// Too many addresses at once: the global budget still bounds the chain.
		clear(b.perAddr)
	}
}

// flush writes the summary of the refusals dropped since the last one.
func (b *RefusalBudget) flush() {
	b.mu.Lock()
	dropped, byAddr, first, last := b.dropped, b.byAddr, b.first, b.last
	b.dropped, b.byAddr, b.flushing = nil, nil, false
	b.mu.Unlock()
	total := 0
	for _, n := range dropped {
		total += n
	}
	if total == 0 {
		return
	}
	in := models.AuditInput{Actor: models.ActorGateway, Action: models.AuditRefusalsDropped, Outcome: models.OutcomeRefused,
		Detail: map[string]any{"total": total, "by_action": dropped, "by_address": topAddresses(byAddr),
			"addresses": len(byAddr), "from": first.UTC().Format(time.RFC3339Nano), "to": last.UTC().Format(time.RFC3339Nano)}}
	b.log.Warn("refused requests not audited one by one: too many", "total", total, "addresses", len(byAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := b.ledger.Audit(ctx, in); err != nil {
		b.log.Error("writing the summary of dropped refusals", "err", err, "total", total)
	}
}

// topAddresses keeps the addresses with the most dropped refusals.
func topAddresses(byAddr map[string]int) map[string]int {
	keys := make([]string, 0, len(byAddr))
	for k := range byAddr {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if byAddr[keys[i]] != byAddr[keys[j]] {
			return byAddr[keys[i]] > byAddr[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := map[string]int{}
	for _, k := range keys[:min(len(keys), maxListedAddresses)] {
		out[k] = byAddr[k]
	}
	return out
}

// addressKey is the budget's name for a client address: the address, or an IPv6 address's
// /64, which one client usually holds whole.
func addressKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
