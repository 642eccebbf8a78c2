package models

import (
	"context"
	"fmt"

	"gorm.io/gorm"
)

// Params at rest. An operation's params are what its downstream receives, so the ledger keeps
// them whole until retention drops them. With data keys (Config.DataKeys), the params of a
// call that has sensitive values are kept twice: masked in the params column, which every
// reader sees, and sealed (AES-256-GCM, bound to the operation id) in params_sealed, which
// only Params opens, for the request itself. Without data keys they are kept in clear, and
// the gateway warns at start when its catalogue has sensitive params.

// SealsParams reports whether the ledger seals sensitive params (it has data keys): only then
// does it use NewOperation.Masked.
func (l *Ledger) SealsParams() bool { return l.data != nil }

// storedParams returns the params and sealed params to record for operation id.
func (l *Ledger) storedParams(id string, params, masked []byte) (*string, *string) {
	if masked == nil || l.data == nil {
		return ptr(string(params)), nil
	}
	return ptr(string(masked)), ptr(l.data.Seal(params, []byte(id)))
}

// Params returns op's params as its downstream receives them: opened with the data keys when
// they are sealed. Purged params, and sealed ones without the key that sealed them, are
// errors: nothing can be sent.
func (l *Ledger) Params(op *Operation) ([]byte, error) {
	switch {
	case op.Params == nil:
		return nil, fmt.Errorf("ledger: the params of %s were purged", op.ID)
	case op.ParamsSealed == nil:
		return []byte(*op.Params), nil
	case l.data == nil:
		return nil, fmt.Errorf("ledger: the params of %s are sealed with a data key, and IDEMGATE_DATA_KEY is not set", op.ID)
	}
	plain, err := l.data.Open(*op.ParamsSealed, []byte(op.ID))
	if err != nil {
		return nil, fmt.Errorf("ledger: params of %s: %w", op.ID, err)
	}
	return plain, nil
}

// CheckDataKeys refuses a ledger that holds sealed params when it was given no data keys: its
// workers could send none of them. (A missing old key shows on the operations it sealed.)
func (l *Ledger) CheckDataKeys(ctx context.Context) error {
	if l.data != nil {
		return nil
	}
	var ids []string
	// operations_sealed indexes exactly these rows, so this is one index probe.
	if err := l.scope(ctx).Model(&Operation{}).Where("params_sealed IS NOT NULL").Limit(1).Pluck("id", &ids).Error; err != nil {
		return unavailable("look for sealed params", err)
	}
	if len(ids) > 0 {
		return fmt.Errorf("ledger: IDEMGATE_DATA_KEY is not set, but the ledger holds params sealed with a data key (%s, among others): set it", ids[0])
	}
	return nil
}

// Masker returns tool's masking of canonical params, and false when tool has nothing to mask
// (or is unknown: then its params are left as they are).
type Masker func(tool string, params []byte) (masked []byte, ok bool, err error)

// Rotation says what RotateDataKeys did.
type Rotation struct {
	Resealed int // sealed under an older key, now under the current one
	Sealed   int // kept in clear (recorded without a data key), now sealed
	// LedgerKey: the ledger's own key was sealed anew (see LedgerKey).
	LedgerKey bool
	// TenantSecrets: tenant secrets sealed under an older key, now under the current one.
	TenantSecrets int
	// AuditKeys: audit signing keys sealed under an older key, now under the current one.
	AuditKeys int
	// RoutingKeys: webhook routing keys sealed under an older key, now under the current one.
	RoutingKeys int
}

// RotateDataKeys seals everything that needs it under the current data key: the ledger's own
// key, the tenant secrets, and every stored params value sealed under an older key or, for tools with sensitive
// params (mask says which), kept in clear. It works in batches of batch rows, each one
// transaction, and each row is changed only if it still holds what was read (retention may
// drop it meanwhile). It can be run again; it finds nothing left to do.
func (l *Ledger) RotateDataKeys(ctx context.Context, mask Masker, batch int) (Rotation, error) {
	var r Rotation
	if l.data == nil {
		return r, fmt.Errorf("ledger: IDEMGATE_DATA_KEY is not set: there is no key to rotate to")
	}
	var err error
	if r.LedgerKey, err = resealLedgerKey(l.scope(ctx), l.data); err != nil {
		return r, err
	}
	if r.TenantSecrets, err = l.resealTenantSecrets(ctx); err != nil {
		return r, err
	}
	if r.AuditKeys, err = l.resealAuditKeys(ctx); err != nil {
		return r, err
	}
	if r.RoutingKeys, err = l.resealRoutingKeys(ctx); err != nil {
		return r, err
	}
	after := ""
	for {
		var ops []*Operation
		err := l.scope(ctx).Select("id, tool, params, params_sealed").
			Where("id > ? AND params IS NOT NULL", after).Order("id").Limit(batch).Find(&ops).Error
		if err != nil {
			return r, unavailable("read params to rotate", err)
		}
		if len(ops) == 0 {
			return r, nil
		}
		after = ops[len(ops)-1].ID
		err = l.scope(ctx).Transaction(func(tx *gorm.DB) error {
			for _, op := range ops {
				if err := l.rotate(tx, op, mask, &r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return r, err
		}
	}
}

func (l *Ledger) rotate(tx *gorm.DB, op *Operation, mask Masker, r *Rotation) error {
	aad := []byte(op.ID)
	if op.ParamsSealed != nil {
		if l.data.Current(*op.ParamsSealed) {
			return nil
		}
		plain, err := l.data.Open(*op.ParamsSealed, aad)
		if err != nil {
			return fmt.Errorf("ledger: rotate %s: %w", op.ID, err)
		}
		res := tx.Model(&Operation{}).Where("id = ? AND params_sealed = ?", op.ID, *op.ParamsSealed).
			Update("params_sealed", l.data.Seal(plain, aad))
		if res.Error != nil {
			return unavailable("reseal "+op.ID, res.Error)
		}
		r.Resealed += int(res.RowsAffected)
		return nil
	}
	masked, ok, err := mask(op.Tool, []byte(*op.Params))
	if err != nil {
		return fmt.Errorf("ledger: rotate %s: %w", op.ID, err)
	}
	if !ok {
		return nil
	}
	res := tx.Model(&Operation{}).Where("id = ? AND params_sealed IS NULL AND params = ?", op.ID, *op.Params).
		Updates(map[string]any{"params": string(masked), "params_sealed": l.data.Seal([]byte(*op.Params), aad)})
	if res.Error != nil {
		return unavailable("seal "+op.ID, res.Error)
	}
	r.Sealed += int(res.RowsAffected)
	if res.RowsAffected == 0 {
		return nil
	}
	return l.forgetReplays(tx, op.ID) // sealed: no longer kept by any replay cache
}
