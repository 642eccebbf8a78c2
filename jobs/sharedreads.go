package jobs

import (
	"context"
	"sync"
	"time"

	"github.com/idemgate/idemgate/models"
)

// sharedReads lets the requests waiting on one operation share the ledger reads they make at
// the same moment. A change wakes every waiter of an operation at once: under a storm of a
// thousand duplicates, a thousand reads of the same row would queue for the pool's
// connections, ahead of the write that settles the next operation. With sharing, one read
// answers them all.
//
// A waiter joins only a read that began after the moment it names (after it subscribed to
// the operation's changes), so it never takes an answer older than its subscription and can
// miss no change.
type sharedReads struct {
	read   func(ctx context.Context, tenant, id string) (*models.Operation, error)
	mu     sync.Mutex
	latest map[string]*sharedRead // by tenant and operation id
}

type sharedRead struct {
	began  time.Time
	done   chan struct{}
	op     *models.Operation
	err    error
	joined int // waiters that joined it besides the one reading (under sharedReads.mu)
}

// newSharedReads shares the reads of read, the ledger's Get.
func newSharedReads(read func(ctx context.Context, tenant, id string) (*models.Operation, error)) *sharedReads {
	return &sharedReads{read: read, latest: map[string]*sharedRead{}}
}

// get returns operation id of tenant as read by a read that began no earlier than notBefore.
// The caller owns the returned value.
func (s *sharedReads) get(ctx context.Context, tenant, id string, notBefore time.Time) (*models.Operation, error) {
	key := tenant + "\x00" + id
	s.mu.Lock()
	r := s.latest[key]
	if r == nil || r.began.Before(notBefore) {
		r = &sharedRead{began: time.Now(), done: make(chan struct{})}
		s.latest[key] = r
		s.mu.Unlock()
		// The read serves other waiters too: one of them going away must not fail it.
		r.op, r.err = s.read(context.WithoutCancel(ctx), tenant, id)
		close(r.done)
		s.mu.Lock()
		if s.latest[key] == r {
			delete(s.latest, key)
		}
		s.mu.Unlock()
	} else {
		r.joined++
		s.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	op := *r.op // each waiter renders its own copy; nothing reached through it is modified
	return &op, nil
}
