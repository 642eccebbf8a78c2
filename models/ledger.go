package models

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/fingerprint"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// Ledger is the durable record of operations: every rule about what may change, and how, lives
// behind its methods. It is safe for concurrent use.
type Ledger struct {
	db       *gorm.DB
	dialect  Dialect
	now      func() time.Time
	changes  *Hub
	observer Observer
	tracer   trace.Tracer
	// payloads renders the operation object of webhook payloads (see Config.Payloads).
	payloads PayloadRenderer
	// publicURL is Config.PublicURL, mail Config.Mail.
	publicURL string
	mail      bool
	// keys remembers recent authentications (see Authenticate, Config.KeyCacheTTL).
	keys *keyCache
	// key is the ledger's own key (Config.Key); data seals sensitive params (Config.DataKeys).
	key  *fingerprint.Key
	data *datakey.Keyring
	// keyPlan decides how PostgreSQL plans the key look-up (see keyPlan).
	keyPlan keyPlan
	// replays answers replays of terminal operations without a read (see replayCache).
	replays *replayCache
	// misses guesses what a replay cache miss is, a new key or an old one (see missGuess).
	misses missGuess
	// repeats counts repeated requests until they are written (see Repeats).
	repeats repeatTally
	// batch gathers concurrent claims and outcomes into shared statements (groupcommit.go);
	// nil on SQLite.
	batch *batchers
	// deadline bounds a request's ledger work (Config.RequestDeadline, deadline.go); ready
	// keeps the readiness probe's last answer.
	deadline time.Duration
	ready    readiness
}

// Config is what a ledger is built from: an opened, migrated database and what the ledger
// calls out to. Everything is given here, once: a ledger has no setters, so no caller can use
// one that is half wired.
type Config struct {
	DB      *gorm.DB
	Dialect Dialect
	// Now is the ledger's clock (leases, backoff, settle windows, retention); nil means the
	// wall clock.
	Now func() time.Time
	// PublicURL is the console's address as people reach it (serve --public-url), without a
	// trailing slash: webhook payloads link to the operation's page under it. "" links nowhere.
	PublicURL string
	// Mail writes an email to each reviewer of the tenant when a review opens or an approval is
	// about to lapse (models/mail.go), for a mailer to send; off, none is written.
	Mail bool
	// Payloads renders the operation object of webhook payloads, masked as the API masks it.
	// A ledger without one refuses (fails the transaction of) any change that a subscription
	// wants to hear about, rather than commit the change without its notification or with
	// its params unmasked.
	Payloads PayloadRenderer
	// Observer is told of every committed transition (metrics, logs); nil: nobody.
	Observer Observer
	// Tracer makes one span per ledger transaction; nil: no spans.
	Tracer trace.Tracer
	// KeyCacheTTL is how long an authenticated API key is believed without a database read:
	// zero means DefaultKeyCacheTTL, a negative value reads the database on every request.
	KeyCacheTTL time.Duration
	// Key is the ledger's key (LedgerKey reads it): it keys fingerprints and derives
	// downstream keys. A ledger without it records operations only with the fingerprints and
	// downstream keys it is given; Fingerprint and DownstreamKey panic.
	Key *fingerprint.Key
	// DataKeys, when set, seal the params of operations that have sensitive ones
	// (NewOperation.Masked) at rest; nil stores them in clear.
	DataKeys *datakey.Keyring
	// ReplayCacheBytes bounds the memory of the replay cache, used on PostgreSQL while the
	// ledger's listener runs (see replayCache): zero means DefaultReplayCacheBytes, a negative
	// value turns it off.
	ReplayCacheBytes int64
	// RequestDeadline bounds all the ledger work of one request (deadline.go): zero means
	// DefaultRequestDeadline, a negative value none.
	RequestDeadline time.Duration
}

// New returns the ledger cfg describes.
func New(cfg Config) *Ledger {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ttl := cfg.KeyCacheTTL
	switch {
	case ttl == 0:
		ttl = DefaultKeyCacheTTL
	case ttl < 0:
		ttl = 0
	}
	replays := cfg.ReplayCacheBytes
	if replays == 0 {
		replays = DefaultReplayCacheBytes
	}
	l := &Ledger{db: cfg.DB, dialect: cfg.Dialect, now: cfg.Now, changes: NewHub(), keys: newKeyCache(ttl),
		payloads: cfg.Payloads, mail: cfg.Mail, publicURL: strings.TrimRight(cfg.PublicURL, "/"), observer: cfg.Observer, tracer: cfg.Tracer, key: cfg.Key, data: cfg.DataKeys,
		replays: newReplayCache(replays), deadline: cfg.RequestDeadline}
	if l.deadline == 0 {
		l.deadline = DefaultRequestDeadline
	}
	l.batch = l.newBatchers()
	return l
}

// DB exposes the handle for readiness checks and tests.
func (l *Ledger) DB() *gorm.DB { return l.db }

// Dialect says which engine the ledger runs on.
func (l *Ledger) Dialect() Dialect { return l.dialect }

// Changes is the feed of committed operation changes made through this ledger.
func (l *Ledger) Changes() *Hub { return l.changes }

func (l *Ledger) clock() time.Time { return l.now().UTC().Truncate(time.Microsecond) }

// Ready reports whether the database answers, accepts writes, and has a schema this build can
// serve: its own, or a newer one whose steps this build's schema still serves (a rolling
// upgrade). A PostgreSQL server that takes no writes (a standby, an old primary) is not
// ready: nothing could be recorded there. It answers within 1.5 s, and at once while the
// last probe failed (the next one runs in the background meanwhile, deadline.go).
func (l *Ledger) Ready(ctx context.Context) error {
	return l.ready.ready(ctx, l.probe)
}

// probe is Ready's check itself.
func (l *Ledger) probe(ctx context.Context) error {
	if l.dialect == Postgres {
		if err := l.db.WithContext(ctx).Exec(checkWritable).Error; err != nil {
			return unavailable("check the server accepts writes", err)
		}
	}
	v, err := CurrentVersion(ctx, l.db)
	if err != nil {
		return err
	}
	switch {
	case v < SchemaVersion():
		return errorf(CodeUnavailable, "ledger: schema version %d, want %d: run idemgate migrate", v, SchemaVersion())
	case v > SchemaVersion():
		// A newer release has migrated the ledger during a rolling upgrade: this replica stays
		// in service while the ledger still serves it.
		if err := servesThisBuild(l.db.WithContext(ctx), v); err != nil {
			return errorf(CodeUnavailable, "ledger: %v", err)
		}
	}
	return nil
}

// Hub tells waiters that an operation changed. A waiter subscribes before reading the
// operation, so a change committed between its read and its wait is never missed.
type Hub struct {
	mu      sync.Mutex
	waiters map[string][]chan struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{waiters: map[string][]chan struct{}{}} }

// Subscribe returns a channel closed at the next change of operation id, and a function to
// drop the subscription.
func (h *Hub) Subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.waiters[id] = append(h.waiters[id], ch)
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		list := h.waiters[id]
		for i, c := range list {
			if c == ch {
				h.waiters[id] = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(h.waiters[id]) == 0 {
			delete(h.waiters, id)
		}
	}
}

// Publish wakes every waiter of operation id.
func (h *Hub) Publish(id string) {
	h.mu.Lock()
	list := h.waiters[id]
	delete(h.waiters, id)
	h.mu.Unlock()
	for _, ch := range list {
		close(ch)
	}
}

// txn runs fn in a transaction and publishes the changed operations after commit.
func (l *Ledger) txn(ctx context.Context, what string, fn func(tx *gorm.DB) ([]string, error)) (err error) {
	var changed []string
	var transitions []Transition
	ctx, span := l.startWrite(ctx, what)
	defer func() { endWrite(span, transitions, err) }()
	committing := false
	var deferred pending
	ctx, cancel := l.bound(ctx)
	defer cancel()
	err = l.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		// Set returns a chain, not a session: without Session every statement of fn would
		// pile onto one shared Statement.
		tx = tx.Set(transitionsKey, &transitions).Set(pendingKey, &deferred).Session(&gorm.Session{})
		if changed, err = fn(tx); err != nil {
			return err
		}
		if err := l.flush(tx, &deferred, changed); err != nil {
			return err
		}
		committing = true // what fails from here is the COMMIT itself
		return nil
	})
	if err != nil && committing {
		return commitCutOff(l.dialect, what, err)
	}
	if err != nil {
		return unavailable(what, err)
	}
	if len(deferred.forget) > 0 {
		l.replays.forget(deferred.forget...)
	}
	l.committed(ctx, changed, transitions)
	return nil
}

// committed tells this process what a write just committed: the waiters of the changed
// operations, and the observer of its transitions.
func (l *Ledger) committed(ctx context.Context, changed []string, transitions []Transition) {
	for _, id := range changed {
		l.changes.Publish(id)
	}
	if l.observer != nil {
		requestID, traceID := RequestIDFrom(ctx), TraceIDFrom(ctx)
		for _, t := range transitions {
			t.RequestID, t.TraceID = requestID, traceID
			l.observer.Transitioned(t)
		}
	}
}

// Transition is a committed state change (or a creation, with From ""), reported to the
// ledger's observer after commit: metrics and logs see only what is durable.
type Transition struct {
	OperationID string
	Tenant      string
	Tool        string
	From, To    State
	Attempt     int
	Actor       string
	ErrorClass  string
	// RequestID and TraceID say what caused the change: the API request's id (or the
	// attempt's, which is the X-Request-Id sent downstream) and the trace of its span.
	RequestID, TraceID string
}

// Observer is told of every committed transition. It must be quick and must not fail: it
// runs on the path of the change it observes.
type Observer interface {
	Transitioned(Transition)
}

const transitionsKey = "idemgate:transitions"

// noteTransition adds a transition to the ones tx reports after commit.
func noteTransition(tx *gorm.DB, t Transition) {
	if v, ok := tx.Get(transitionsKey); ok {
		list := v.(*[]Transition)
		*list = append(*list, t)
	}
}

// eventInput describes an event to append.
type eventInput struct {
	op      *Operation
	typ     string
	from    State
	to      State
	attempt int
	actor   string
	detail  map[string]any
	// rawDetail, when set, is the detail already encoded as a JSON object (a policy decision,
	// written as the operation_policies row holds it), in place of detail.
	rawDetail []byte
}

// newEvent is the row of the event in describes, at at.
func newEvent(at time.Time, in eventInput) (Event, error) {
	ev := Event{OperationID: in.op.ID, Tenant: in.op.Tenant, At: at, Type: in.typ, Actor: in.actor}
	if in.from != "" {
		ev.FromState = ptr(in.from)
	}
	if in.to != "" {
		ev.ToState = ptr(in.to)
	}
	if in.attempt > 0 {
		ev.Attempt = ptr(in.attempt)
	}
	if len(in.rawDetail) > 0 {
		ev.Detail = ptr(string(in.rawDetail))
	} else if len(in.detail) > 0 {
		b, err := json.Marshal(in.detail)
		if err != nil {
			return ev, err
		}
		ev.Detail = ptr(string(b))
	}
	return ev, nil
}

func (l *Ledger) appendEvent(tx *gorm.DB, at time.Time, in eventInput) error {
	ev, err := newEvent(at, in)
	if err != nil {
		return err
	}
	if v, ok := tx.Get(pendingKey); ok {
		p := v.(*pending)
		p.events = append(p.events, ev)
		return nil
	}
	return tx.Create(&ev).Error
}

func notFound(err error) bool {
	return errors.Is(err, gorm.ErrRecordNotFound) || errors.Is(err, sql.ErrNoRows)
}
