package models

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/idemgate/idemgate/models/datakey"
	"github.com/idemgate/idemgate/models/fingerprint"
	"gorm.io/gorm"
)

// ledgerKeySetting names the setting that holds the ledger's key (docs/STATES.md).
const ledgerKeySetting = "ledger.key"

// newLedgerKey returns a fresh ledger key, encoded as the settings table keeps it.
func newLedgerKey() string {
	var b [fingerprint.KeySize]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ledgerKeyAAD binds the sealed ledger key to its setting.
var ledgerKeyAAD = []byte(ledgerKeySetting)

// LedgerKey reads the ledger's key from the migrated database db: the key of its fingerprints
// and downstream keys (docs/STATES.md). The migration that introduced it generated it once, so every
// replica and every command reads the same one. It never changes: were it lost, every recorded
// fingerprint would stop matching its retries, so a ledger without it is refused rather than
// given a new one.
//
// With data keys, the key is kept sealed under them (and sealed here, in place, the first time
// a gateway with data keys starts): a reader of the database who had the ledger's key beside
// the fingerprints could test guesses of a sealed value offline, which sealing must prevent.
// A sealed ledger key without data keys is an error.
func LedgerKey(ctx context.Context, db *gorm.DB, keys *datakey.Keyring) (*fingerprint.Key, error) {
	stored, err := readSetting(ctx, db, ledgerKeySetting)
	if err != nil {
		return nil, err
	}
	if stored == "" {
		return nil, fmt.Errorf("ledger: the ledger's key (setting %s) is missing: it was made when the ledger was migrated and never changes; restore the settings table from a backup", ledgerKeySetting)
	}
	encoded := stored
	if _, err := datakey.KeyID(stored); err == nil { // sealed
		if keys == nil {
			return nil, fmt.Errorf("ledger: the ledger's key is sealed with a data key, and IDEMGATE_DATA_KEY is not set")
		}
		plain, err := keys.Open(stored, ledgerKeyAAD)
		if err != nil {
			return nil, fmt.Errorf("ledger: the ledger's key: %w", err)
		}
		encoded = string(plain)
	} else if keys != nil {
		// Compare-and-set: replicas starting at once seal the same key; one write wins.
		err := db.WithContext(ctx).Table("settings").Where("name = ? AND value = ?", ledgerKeySetting, stored).
			Update("value", keys.Seal([]byte(stored), ledgerKeyAAD)).Error
		if err != nil {
			return nil, unavailable("seal the ledger's key", err)
		}
	}
	raw, err := base64.RawURLEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("ledger: the ledger's key (setting %s) is malformed: %w", ledgerKeySetting, err)
	}
	k, err := fingerprint.NewKey(raw)
	if err != nil {
		return nil, fmt.Errorf("ledger: the ledger's key (setting %s): %w", ledgerKeySetting, err)
	}
	return k, nil
}

// resealLedgerKey seals the ledger's key under the current data key, opening it with an older
// one or taking it from clear; it does nothing when it is sealed under the current key.
func resealLedgerKey(tx *gorm.DB, keys *datakey.Keyring) (bool, error) {
	stored, err := readSetting(tx.Statement.Context, tx, ledgerKeySetting)
	if err != nil || stored == "" || keys.Current(stored) {
		return false, err
	}
	plain := []byte(stored)
	if _, err := datakey.KeyID(stored); err == nil {
		if plain, err = keys.Open(stored, ledgerKeyAAD); err != nil {
			return false, fmt.Errorf("ledger: the ledger's key: %w", err)
		}
	}
	res := tx.Table("settings").Where("name = ? AND value = ?", ledgerKeySetting, stored).
		Update("value", keys.Seal(plain, ledgerKeyAAD))
	if res.Error != nil {
		return false, unavailable("reseal the ledger's key", res.Error)
	}
	return res.RowsAffected == 1, nil
}

func readSetting(ctx context.Context, db *gorm.DB, name string) (string, error) {
	var v []string
	if err := db.WithContext(ctx).Table("settings").Where("name = ?", name).Pluck("value", &v).Error; err != nil {
		return "", unavailable("read setting "+name, err)
	}
	if len(v) == 0 {
		return "", nil
	}
	return v[0], nil
}

// Fingerprint returns the fingerprint of a call of tool with canonical params under the
// ledger's key (docs/STATES.md). It is what NewOperation.Fingerprint must hold.
func (l *Ledger) Fingerprint(tool string, canonicalParams []byte) string {
	return l.mustKey().Of(tool, canonicalParams)
}

// DownstreamKey returns the downstream key of tenant's operation key (docs/STATES.md). It is what
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
