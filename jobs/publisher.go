package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// DefaultWebhookWindow is how long a delivery is retried before it is dead.
const DefaultWebhookWindow = 24 * time.Hour

// PublisherConfig wires a publisher. Zero values take the defaults.
type PublisherConfig struct {
	Ledger *models.Ledger
	Worker string // this process's name on leases
	// Every is how often the publisher looks for due deliveries (default 250 ms).
	Every time.Duration
	// Concurrency bounds the deliveries in flight; it is also the claim batch, so that no
	// claimed delivery waits for a slot while its lease runs (default 16).
	Concurrency int
	// Timeout bounds one POST (default 10 s); the claim's lease is Timeout + LeaseMargin
	// (default 10 s).
	Timeout     time.Duration
	LeaseMargin time.Duration
	// Window is how long a delivery is retried (DefaultWebhookWindow); InitialBackoff (5 s) and
	// MaxBackoff (1 h) space the retries.
	Window         time.Duration
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// Resolver resolves receivers' host names at send time (nil: the system resolver).
	Resolver models.AddrResolver
	Now      func() time.Time
	Jitter   func() float64 // uniform in [0, 1); nil: math/rand/v2
	Log      *slog.Logger
	// Getenv reads the environment for env: routing keys (nil: os.Getenv); SecretRefs is
	// what the operator set aside for routing key references (the zero value: nothing).
	Getenv     func(string) string
	SecretRefs models.SecretRefPolicy
}

func (c *PublisherConfig) defaults() {
	c.Every = orDuration(c.Every, 250*time.Millisecond)
	c.Timeout = orDuration(c.Timeout, 10*time.Second)
	c.LeaseMargin = orDuration(c.LeaseMargin, 10*time.Second)
	c.Window = orDuration(c.Window, DefaultWebhookWindow)
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	c.InitialBackoff = orDuration(c.InitialBackoff, 5*time.Second)
	c.MaxBackoff = orDuration(c.MaxBackoff, time.Hour)
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Jitter == nil {
		c.Jitter = rand.Float64
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
}

// Publisher delivers the outbox (docs/WEBHOOKS.md): it claims due deliveries under a lease, posts each
// payload signed per Standard Webhooks, records every attempt, and retries with backoff until
// the window closes. Any number of replicas may run one: a delivery is claimed by one at a
// time, and one whose publisher died is claimed again when its lease runs out, so a message is
// delivered at least once and never lost.
type Publisher struct {
	cfg     PublisherConfig
	guarded *http.Client // checks every address it connects to
	open    *http.Client // for subscriptions that allow private targets
}

// NewPublisher returns a publisher ready to run.
func NewPublisher(cfg PublisherConfig) *Publisher {
	cfg.defaults()
	return &Publisher{cfg: cfg, guarded: webhookClient(cfg.Resolver, cfg.Timeout), open: webhookClient(nil, cfg.Timeout)}
}

// Run delivers until ctx ends.
func (p *Publisher) Run(ctx context.Context) {
	ticker := time.NewTicker(p.cfg.Every)
	defer ticker.Stop()
	failing := false
	for {
		n, err := p.PublishOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			p.cfg.Log.Error("webhook publisher failed; will keep trying", "err", err)
			failing = true
		case err == nil && failing:
			p.cfg.Log.Info("webhook publisher recovered")
			failing = false
		}
		if err == nil && n >= p.cfg.Concurrency {
			continue // a full batch: more are waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// PublishOnce claims the due deliveries (at most Concurrency), sends them side by side and
// records the outcomes. It returns how many it claimed.
func (p *Publisher) PublishOnce(ctx context.Context) (int, error) {
	claimed, err := p.cfg.Ledger.ClaimDeliveries(ctx, p.cfg.Worker, p.cfg.Concurrency, p.cfg.Timeout+p.cfg.LeaseMargin)
	if err != nil {
		return 0, fmt.Errorf("publisher: claim: %w", err)
	}
	var wg sync.WaitGroup
	for _, c := range claimed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.deliver(ctx, c)
		}()
	}
	wg.Wait()
	return len(claimed), nil
}

// deliver sends one claimed delivery and records what happened.
func (p *Publisher) deliver(ctx context.Context, c models.ClaimedDelivery) {
	status, latency, sendErr := p.send(ctx, c)
	skipped := errors.Is(sendErr, errNothingToSend)
	d := DecideDelivery(DeliveryInput{Delivered: sendErr == nil || skipped, Attempt: c.Delivery.WindowAttempt(),
		WindowStart: c.Delivery.WindowStart(), Window: p.cfg.Window,
		Backoff: catalog.RetryPolicy{InitialBackoff: p.cfg.InitialBackoff, MaxBackoff: p.cfg.MaxBackoff},
		Now:     p.cfg.Now(), Jitter: p.cfg.Jitter()})
	out := models.DeliveryOutcome{StatusCode: status, Latency: latency, Status: d.Status, NextAttemptAt: d.NextAttemptAt}
	if sendErr != nil {
		out.Error = sendErr.Error()
	}
	// Recorded even when shutting down: the attempt happened.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := p.cfg.Ledger.RecordDelivery(rctx, p.cfg.Worker, c, out)
	switch {
	case models.ErrorCode(err) == models.CodeStale:
		p.cfg.Log.Info("webhook outcome superseded", "delivery_id", c.Delivery.ID, "err", err)
	case err != nil:
		// The lease runs out and the delivery is sent again: at least once, never lost.
		p.cfg.Log.Warn("webhook outcome not recorded", "delivery_id", c.Delivery.ID, "err", err)
	case d.Status == models.DeliveryDead:
		p.cfg.Log.Warn("webhook delivery dead: its retry window closed", "delivery_id", c.Delivery.ID,
			"webhook_id", c.Delivery.OutboxID, "tenant", c.Tenant, "err", out.Error)
	}
}

// maxErrorBody bounds the part of a refusal's body kept as the attempt's error.
const maxErrorBody = 200

// send posts c's payload, signed, and reports the receiver's status, the latency, and an error
// unless the receiver answered 2xx.
func (p *Publisher) send(ctx context.Context, c models.ClaimedDelivery) (int, time.Duration, error) {
	key, err := models.WebhookKey(c.Secret)
	if err != nil {
		return 0, 0, fmt.Errorf("sign: %w", err)
	}
	body, err := p.formatted(ctx, c)
	if err != nil {
		return 0, 0, fmt.Errorf("%s body: %w", c.Format, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, fmt.Errorf("build request: %w", err)
	}
	id, ts := c.Delivery.OutboxID, p.cfg.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "idemgate-webhooks/1")
	// Spelled as Standard Webhooks spells them; header names are case-insensitive anyway. A chat
	// or pager format is signed too: its receiver ignores the headers, a proxy may check them.
	req.Header["webhook-id"] = []string{id}
	req.Header["webhook-timestamp"] = []string{strconv.FormatInt(ts, 10)}
	req.Header["webhook-signature"] = []string{SignWebhook(key, id, ts, body)}
	client := p.guarded
	if c.AllowPrivate {
		client = p.open
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, time.Since(start), err
	}
	defer resp.Body.Close()
	var head []byte
	if !c.AllowPrivate {
		head, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	latency := time.Since(start)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		return resp.StatusCode, latency, nil
	case c.AllowPrivate:
		// A target inside the network may be a service that was never meant to answer
		// strangers (an admin API, cloud metadata): what it says is not kept, not even its
		// reason phrase, so a subscription cannot be used to read it through the console.
		return resp.StatusCode, latency, fmt.Errorf("the receiver answered %d %s (its answer is not kept: a private target)",
			resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return resp.StatusCode, latency, fmt.Errorf("the receiver answered %s: %q", resp.Status, head)
}
