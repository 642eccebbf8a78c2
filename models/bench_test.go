package models_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
)

func eachDialect(b *testing.B, fn func(b *testing.B, d models.Dialect)) {
	for _, d := range testdb.Dialects {
		b.Run(string(d), func(b *testing.B) {
			b.ReportAllocs()
			fn(b, d)
		})
	}
}

// BenchmarkSubmitClaim is the ledger's half of a new operation: the claiming submit (one
// transaction) and the recorded outcome (the second).
func BenchmarkSubmitClaim(b *testing.B) {
	eachDialect(b, func(b *testing.B, d models.Dialect) {
		l, c := setup(b, d)
		ctx := context.Background()
		b.ResetTimer()
		for i := range b.N {
			in := newOp(c, fmt.Sprintf("claim-%d", i))
			in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
			s, err := l.Submit(ctx, in)
			if err != nil || !s.Created {
				b.Fatalf("submit %d: created %v, %v", i, s.Created, err)
			}
			err = l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", models.AttemptOutcome{
				Class: "succeeded", DownstreamStatus: 201, To: models.StateSucceeded, Result: []byte(`{"id":"R-1"}`), DownstreamRef: "R-1"})
			if err != nil {
				b.Fatalf("finish %d: %v", i, err)
			}
		}
	})
}

// BenchmarkReplayLookup is the ledger's whole cost of a replay: the key look-up, run from
// as many goroutines as GOMAXPROCS.
func BenchmarkReplayLookup(b *testing.B) {
	eachDialect(b, func(b *testing.B, d models.Dialect) {
		l, c := setup(b, d)
		ctx := context.Background()
		if _, err := l.Submit(ctx, newOp(c, "replay")); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s, err := l.Submit(ctx, newOp(c, "replay"))
				if err != nil || s.Created {
					b.Fatalf("replay: created %v, %v", s.Created, err)
				}
			}
		})
	})
}

// BenchmarkAuthenticate is a request's authentication with its key remembered.
func BenchmarkAuthenticate(b *testing.B) {
	l := testdb.Ledger(b, models.SQLite)
	ctx := context.Background()
	if _, err := l.CreateTenant(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme"); err != nil {
		b.Fatal(err)
	}
	k, err := l.CreateAPIKey(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI}, "acme", "agent-1", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := l.Authenticate(ctx, k.Secret); err != nil {
			b.Fatal(err)
		}
	}
}
