package models

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// The audit signing key (docs/AUDIT.md) signs every export's trailer and every audit checkpoint with
// Ed25519, so that a file rewritten and rehashed by someone without the key fails to verify.
// Its private half is sealed under the data key like a tenant secret; its public halves, the
// retired ones included, are published with their validity (AuditKeys) so that a signature
// made before a rotation still verifies for the time it was made.

// Audit actions of the signing key: the key ids are recorded, never a private half.
const (
	AuditKeyGenerate = "audit.key_generate"
	AuditKeyRotate   = "audit.key_rotate"
)

// AuditKeyAlgorithm is the one signature algorithm of audit keys.
const AuditKeyAlgorithm = "Ed25519"

// auditKeysSchema is migration step 21. One current key (not_after NULL) per algorithm: two
// generations at once cannot both make one.
const auditKeysSchema = `
CREATE TABLE audit_signing_keys (
	key_id     TEXT PRIMARY KEY,
	algorithm  TEXT NOT NULL,
	public_key TEXT NOT NULL,
	sealed     TEXT NOT NULL,
	not_before {{ts}} NOT NULL,
	not_after  {{ts}}
);
CREATE UNIQUE INDEX audit_signing_keys_current ON audit_signing_keys (algorithm) WHERE not_after IS NULL;
`

// auditKeyRow is a stored signing key.
type auditKeyRow struct {
	KeyID     string `gorm:"column:key_id;primaryKey"`
	Algorithm string `gorm:"column:algorithm"`
	PublicKey string `gorm:"column:public_key"` // base64 of the 32-byte Ed25519 public key
	Sealed    string `gorm:"column:sealed"`     // the 32-byte seed, sealed under the data key
	NotBefore time.Time
	NotAfter  *time.Time
}

func (auditKeyRow) TableName() string { return "audit_signing_keys" }

func auditKeyAAD(keyID string) []byte { return []byte("audit-signing-key\x00" + keyID) }

// AuditKeyID names a public key: the first 16 hex digits of the SHA-256 of its 32 raw bytes,
// which anyone can recompute from the key itself.
func AuditKeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// AuditPublicKey is a published signing key: what /audit/keys serves and `idemgate audit key
// list` prints, and what an auditor's KEYFILE holds.
type AuditPublicKey struct {
	KeyID     string `json:"key_id"`
	Algorithm string `json:"algorithm"`
	// PublicKey is the base64 of the 32-byte Ed25519 public key; PEM the same key as a
	// SubjectPublicKeyInfo, which openssl reads.
	PublicKey string `json:"public_key"`
	PEM       string `json:"pem"`
	// The key signs for times in [NotBefore, NotAfter); NotAfter is null for the current key.
	NotBefore time.Time  `json:"not_before"`
	NotAfter  *time.Time `json:"not_after"`
}

// AuditKeySet is the published keys, oldest first.
type AuditKeySet struct {
	Keys []AuditPublicKey `json:"keys"`
}

func (r *auditKeyRow) public() (AuditPublicKey, error) {
	raw, err := base64.StdEncoding.DecodeString(r.PublicKey)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return AuditPublicKey{}, fmt.Errorf("ledger: audit key %s: malformed public key", r.KeyID)
	}
	der, err := x509.MarshalPKIXPublicKey(ed25519.PublicKey(raw))
	if err != nil {
		return AuditPublicKey{}, fmt.Errorf("ledger: audit key %s: %w", r.KeyID, err)
	}
	k := AuditPublicKey{KeyID: r.KeyID, Algorithm: r.Algorithm, PublicKey: r.PublicKey,
		PEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), NotBefore: r.NotBefore.UTC()}
	if r.NotAfter != nil {
		t := r.NotAfter.UTC()
		k.NotAfter = &t
	}
	return k, nil
}

// ParseAuditKeySet reads a key set as AuditKeys writes it (a KEYFILE), checking that every
// key is an Ed25519 key whose id is its own.
func ParseAuditKeySet(b []byte) (AuditKeySet, error) {
	var s AuditKeySet
	if err := json.Unmarshal(b, &s); err != nil {
		return AuditKeySet{}, fmt.Errorf("audit keys: %w", err)
	}
	for _, k := range s.Keys {
		raw, err := base64.StdEncoding.DecodeString(k.PublicKey)
		if err != nil || len(raw) != ed25519.PublicKeySize || k.Algorithm != AuditKeyAlgorithm {
			return AuditKeySet{}, fmt.Errorf("audit keys: key %q is not a base64 Ed25519 public key", k.KeyID)
		}
		if AuditKeyID(raw) != k.KeyID {
			return AuditKeySet{}, fmt.Errorf("audit keys: key %q: its id is %s", k.KeyID, AuditKeyID(raw))
		}
	}
	return s, nil
}

// Verify checks that sig is keyID's signature of msg, made at a time inside that key's
// validity: a key rotated out vouches only for what it signed before its rotation.
func (s AuditKeySet) Verify(keyID string, at time.Time, msg, sig []byte) error {
	for _, k := range s.Keys {
		if k.KeyID != keyID {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(k.PublicKey)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return fmt.Errorf("audit key %s: malformed public key", keyID)
		}
		if !ed25519.Verify(ed25519.PublicKey(raw), msg, sig) {
			return fmt.Errorf("the signature does not match: not signed by audit key %s, or changed since", keyID)
		}
		if at.Before(k.NotBefore) || (k.NotAfter != nil && !at.Before(*k.NotAfter)) {
			until := "now"
			if k.NotAfter != nil {
				until = k.NotAfter.UTC().Format(time.RFC3339Nano)
			}
			return fmt.Errorf("signed at %s by audit key %s, which signs only from %s until %s",
				at.UTC().Format(time.RFC3339Nano), keyID, k.NotBefore.UTC().Format(time.RFC3339Nano), until)
		}
		return nil
	}
	return fmt.Errorf("signed by audit key %q, which the key set does not hold", keyID)
}

// AuditKeys returns every signing key's public half, oldest first; none when no key was made.
func (l *Ledger) AuditKeys(ctx context.Context) (AuditKeySet, error) {
	var rows []auditKeyRow
	if err := l.scope(ctx).Order("not_before, key_id").Find(&rows).Error; err != nil {
		return AuditKeySet{}, unavailable("read audit keys", err)
	}
	s := AuditKeySet{Keys: []AuditPublicKey{}}
	for i := range rows {
		k, err := rows[i].public()
		if err != nil {
			return AuditKeySet{}, err
		}
		s.Keys = append(s.Keys, k)
	}
	return s, nil
}

// GenerateAuditKey makes the first signing key. A ledger that has one is CodeConflict (rotate
// it instead); one without data keys is CodeInvalid, since the private half is never stored in
// clear. A checkpoint recorded before, unsigned, is signed with the new key, so that from now
// on an unsigned checkpoint means the settings table was edited.
func (l *Ledger) GenerateAuditKey(ctx context.Context, by Requester) (AuditPublicKey, error) {
	return l.newAuditKey(ctx, by, false)
}

// RotateAuditKey retires the current signing key (its validity ends now; its public half stays
// published) and makes a new one, valid from now. A ledger without a key is CodeNotFound.
func (l *Ledger) RotateAuditKey(ctx context.Context, by Requester) (AuditPublicKey, error) {
	return l.newAuditKey(ctx, by, true)
}

func (l *Ledger) newAuditKey(ctx context.Context, by Requester, rotate bool) (AuditPublicKey, error) {
	if l.data == nil {
		return AuditPublicKey{}, errorf(CodeInvalid, "IDEMGATE_DATA_KEY is not set: the audit signing key is sealed under it and never stored in clear")
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return AuditPublicKey{}, fmt.Errorf("ledger: generate an audit key: %w", err)
	}
	now := l.clock()
	id := AuditKeyID(pub)
	row := auditKeyRow{KeyID: id, Algorithm: AuditKeyAlgorithm, PublicKey: base64.StdEncoding.EncodeToString(pub),
		Sealed: l.data.Seal(priv.Seed(), auditKeyAAD(id)), NotBefore: now}
	action, detail := AuditKeyGenerate, map[string]any{"key_id": id}
	err = l.txn(ctx, "audit key", func(tx *gorm.DB) ([]string, error) {
		var current []string
		if err := tx.Model(&auditKeyRow{}).Where("algorithm = ? AND not_after IS NULL", AuditKeyAlgorithm).Pluck("key_id", &current).Error; err != nil {
			return nil, err
		}
		switch {
		case rotate && len(current) == 0:
			return nil, errorf(CodeNotFound, "there is no audit signing key to rotate: generate one")
		case !rotate && len(current) > 0:
			return nil, errorf(CodeConflict, "the audit signing key %s exists: rotate it to replace it", current[0])
		case rotate:
			res := tx.Model(&auditKeyRow{}).Where("key_id = ? AND not_after IS NULL", current[0]).Update("not_after", now)
			if res.Error != nil {
				return nil, res.Error
			}
			if res.RowsAffected != 1 {
				return nil, errorf(CodeConflict, "the audit signing key %s was rotated meanwhile", current[0])
			}
			action, detail["retired_key_id"] = AuditKeyRotate, current[0]
		}
		if err := tx.Create(&row).Error; err != nil {
			if errors.Is(err, gorm.ErrDuplicatedKey) {
				return nil, errorf(CodeConflict, "an audit signing key was made meanwhile")
			}
			return nil, err
		}
		if !rotate {
			if err := signStoredCheckpoint(tx, id, priv, now); err != nil {
				return nil, err
			}
		}
		_, err := l.appendAudit(tx, now, by.entry(action, "", detail))
		return nil, err
	})
	if err != nil {
		return AuditPublicKey{}, err
	}
	return row.public()
}

// AuditSigner is an opened signing key.
type AuditSigner struct {
	keyID string
	priv  ed25519.PrivateKey
}

// KeyID names the key.
func (s *AuditSigner) KeyID() string { return s.keyID }

// Sign returns the Ed25519 signature of msg.
func (s *AuditSigner) Sign(msg []byte) []byte { return ed25519.Sign(s.priv, msg) }

// AuditSigner opens the key valid at at, to sign a statement made then. No key at all is
// CodeNotFound.
func (l *Ledger) AuditSigner(ctx context.Context, at time.Time) (*AuditSigner, error) {
	return l.openAuditKey(ctx, at)
}

// openAuditKey opens the key whose validity holds at, or the current one when at is zero.
// No key at all is CodeNotFound.
func (l *Ledger) openAuditKey(ctx context.Context, at time.Time) (*AuditSigner, error) {
	q := l.scope(ctx).Where("algorithm = ?", AuditKeyAlgorithm)
	if at.IsZero() {
		q = q.Where("not_after IS NULL")
	} else {
		q = q.Where("not_before <= ? AND (not_after IS NULL OR not_after > ?)", at, at)
	}
	var rows []auditKeyRow
	if err := q.Order("not_before DESC").Limit(1).Find(&rows).Error; err != nil {
		return nil, unavailable("read the audit signing key", err)
	}
	if len(rows) == 0 {
		return nil, errorf(CodeNotFound, "there is no audit signing key (idemgate audit key generate makes one)")
	}
	if l.data == nil {
		return nil, errorf(CodeInvalid, "the audit signing key %s is sealed under IDEMGATE_DATA_KEY, which is not set", rows[0].KeyID)
	}
	seed, err := l.data.Open(rows[0].Sealed, auditKeyAAD(rows[0].KeyID))
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errorf(CodeInvalid, "the audit signing key %s cannot be opened with the data keys", rows[0].KeyID)
	}
	return &AuditSigner{keyID: rows[0].KeyID, priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// AuditSigningReady says whether an export can be signed now: nil when the current key opens,
// CodeNotFound when there is no key (the export is then written unsigned), another error when
// a key exists but cannot be opened (the export is then refused: it must not go out unsigned).
func (l *Ledger) AuditSigningReady(ctx context.Context) error {
	_, err := l.openAuditKey(ctx, time.Time{})
	return err
}

// SignAudit signs msg, a statement made at at, with the key valid at that time, and returns
// the key's id and the signature. No key at all is CodeNotFound.
func (l *Ledger) SignAudit(ctx context.Context, at time.Time, msg []byte) (string, []byte, error) {
	s, err := l.openAuditKey(ctx, at)
	if err != nil {
		return "", nil, err
	}
	return s.keyID, ed25519.Sign(s.priv, msg), nil
}

// resealAuditKeys seals anew under the current data key every signing key an older data key
// sealed (RotateDataKeys), each only if it still holds what was read.
func (l *Ledger) resealAuditKeys(ctx context.Context) (int, error) {
	var rows []auditKeyRow
	if err := l.scope(ctx).Find(&rows).Error; err != nil {
		return 0, unavailable("read audit keys to rotate", err)
	}
	n := 0
	for _, row := range rows {
		if l.data.Current(row.Sealed) {
			continue
		}
		aad := auditKeyAAD(row.KeyID)
		plain, err := l.data.Open(row.Sealed, aad)
		if err != nil {
			return n, fmt.Errorf("ledger: rotate the audit signing key %s: %w", row.KeyID, err)
		}
		res := l.scope(ctx).Model(&auditKeyRow{}).Where("key_id = ? AND sealed = ?", row.KeyID, row.Sealed).
			Update("sealed", l.data.Seal(plain, aad))
		if res.Error != nil {
			return n, unavailable("reseal an audit key", res.Error)
		}
		n += int(res.RowsAffected)
	}
	return n, nil
}
