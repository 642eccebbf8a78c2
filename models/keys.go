package models

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/idemgate/idemgate/models/fingerprint"
	"gorm.io/gorm"
)

// ledgerKeySetting names the setting that holds the ledger's key (SPEC §1).
const ledgerKeySetting = "ledger.key"

// newLedgerKey returns a fresh ledger key, encoded as the settings table keeps it.
func newLedgerKey() string {
	var b [fingerprint.KeySize]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// LedgerKey reads the ledger's key from the migrated database db: the key of its fingerprints
// and downstream keys (SPEC §1). The migration that introduced it generated it once, so every
// replica and every command reads the same one. It never changes: were it lost, every recorded
// fingerprint would stop matching its retries, so a ledger without it is refused rather than
// given a new one.
func LedgerKey(ctx context.Context, db *gorm.DB) (*fingerprint.Key, error) {
	var v []string
	if err := db.WithContext(ctx).Table("settings").Where("name = ?", ledgerKeySetting).Pluck("value", &v).Error; err != nil {
		return nil, unavailable("read the ledger's key", err)
	}
	if len(v) == 0 {
		return nil, fmt.Errorf("ledger: the ledger's key (setting %s) is missing: it was made when the ledger was migrated and never changes; restore the settings table from a backup", ledgerKeySetting)
	}
	raw, err := base64.RawURLEncoding.DecodeString(v[0])
	if err != nil {
		return nil, fmt.Errorf("ledger: the ledger's key (setting %s) is malformed: %w", ledgerKeySetting, err)
	}
	k, err := fingerprint.NewKey(raw)
	if err != nil {
		return nil, fmt.Errorf("ledger: the ledger's key (setting %s): %w", ledgerKeySetting, err)
	}
	return k, nil
}

// Fingerprint returns the fingerprint of a call of tool with canonical params under the
// ledger's key (SPEC §1). It is what NewOperation.Fingerprint must hold.
func (l *Ledger) Fingerprint(tool string, canonicalParams []byte) string {
	return l.mustKey().Of(tool, canonicalParams)
}

// DownstreamKey returns the downstream key of tenant's operation key (SPEC §1). It is what
// NewOperation.DownstreamKey must hold.
func (l *Ledger) DownstreamKey(tenant, key string) string {
	return l.mustKey().DownstreamKey(tenant, key)
}

func (l *Ledger) mustKey() *fingerprint.Key {
	if l.key == nil {
		// Only a ledger wired by hand in a test lacks it; internal/app always loads it.
		panic("models: this ledger was built without its key (Config.Key from LedgerKey)")
	}
	return l.key
}
