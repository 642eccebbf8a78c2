package models

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"gorm.io/gorm"
)

// Tenant secrets are the values of {tenant: NAME} references in the tools file's connections
// (docs/TOOLS.md): a tenant's own key for a downstream. They are sealed under the data key
// (AES-256-GCM, bound to tenant and name), set and removed by an admin, listed by name only,
// and opened only for the downstream request.

// Audit actions of tenant secrets: the name is recorded, never the value.
const (
	AuditSecretSet    = "secret.set"
	AuditSecretDelete = "secret.delete"
)

// TenantSecret is a stored secret as listed: its name and when it was set, never its value.
type TenantSecret struct {
	Tenant string    `gorm:"column:tenant;primaryKey"`
	Name   string    `gorm:"column:name;primaryKey"`
	Sealed string    `gorm:"column:sealed" json:"-"`
	SetAt  time.Time `gorm:"column:set_at"`
}

// TableName is the table of tenant secrets.
func (TenantSecret) TableName() string { return "tenant_secrets" }

var secretNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// maxSecretLen bounds a secret's value.
const maxSecretLen = 8 << 10

func secretAAD(tenant, name string) []byte {
	return []byte("tenant-secret\x00" + tenant + "\x00" + name)
}

// SetTenantSecret stores (or replaces) the tenant's secret name, sealed under the data key.
// Without a data key it is CodeInvalid: a secret is never stored in clear.
func (l *Ledger) SetTenantSecret(ctx context.Context, s Scope, by Requester, tenant, name, value string) error {
	switch {
	case l.data == nil:
		return errorf(CodeInvalid, "IDEMGATE_DATA_KEY is not set: tenant secrets are sealed under it and never stored in clear")
	case !s.Allows(tenant):
		return errorf(CodeNotFound, "tenant %q does not exist", tenant)
	case !secretNameRE.MatchString(name):
		return errorf(CodeInvalid, "secret name %q: use 1–32 lower-case letters, digits, '_' or '-'", name)
	case value == "":
		return errorf(CodeInvalid, "the secret's value is empty")
	case len(value) > maxSecretLen:
		return errorf(CodeInvalid, "the secret's value is longer than %d bytes", maxSecretLen)
	}
	now := l.clock()
	return l.txn(ctx, "set tenant secret", func(tx *gorm.DB) ([]string, error) {
		var n int64
		if err := tx.Model(&Tenant{}).Where("name = ?", tenant).Count(&n).Error; err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errorf(CodeNotFound, "tenant %q does not exist", tenant)
		}
		sealed := l.data.Seal([]byte(value), secretAAD(tenant, name))
		res := tx.Model(&TenantSecret{}).Where("tenant = ? AND name = ?", tenant, name).
			Updates(map[string]any{"sealed": sealed, "set_at": now})
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected == 0 {
			if err := tx.Create(&TenantSecret{Tenant: tenant, Name: name, Sealed: sealed, SetAt: now}).Error; err != nil {
				return nil, err
			}
		}
		_, err := l.appendAudit(tx, now, by.entry(AuditSecretSet, tenant, map[string]any{"name": name}))
		return nil, err
	})
}

// TenantSecrets lists the secrets of tenant (every tenant within s when ""), by tenant and
// name. Their values are left out.
func (l *Ledger) TenantSecrets(ctx context.Context, s Scope, tenant string) ([]TenantSecret, error) {
	var out []TenantSecret
	q := s.apply(l.scope(ctx).Select("tenant", "name", "set_at").Order("tenant, name"), "tenant")
	if tenant != "" {
		q = q.Where("tenant = ?", tenant)
	}
	if err := q.Find(&out).Error; err != nil {
		return nil, unavailable("list tenant secrets", err)
	}
	return out, nil
}

// DeleteTenantSecret removes the tenant's secret name. A missing one is CodeNotFound.
func (l *Ledger) DeleteTenantSecret(ctx context.Context, s Scope, by Requester, tenant, name string) error {
	if !s.Allows(tenant) {
		return errorf(CodeNotFound, "tenant %q has no secret %q", tenant, name)
	}
	now := l.clock()
	return l.txn(ctx, "delete tenant secret", func(tx *gorm.DB) ([]string, error) {
		res := tx.Where("tenant = ? AND name = ?", tenant, name).Delete(&TenantSecret{})
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected == 0 {
			return nil, errorf(CodeNotFound, "tenant %q has no secret %q", tenant, name)
		}
		_, err := l.appendAudit(tx, now, by.entry(AuditSecretDelete, tenant, map[string]any{"name": name}))
		return nil, err
	})
}

// TenantSecret opens the tenant's secret name for a downstream request. A missing one is
// CodeNotFound; one the data keys cannot open is an error too: nothing can be sent with it.
func (l *Ledger) TenantSecret(ctx context.Context, tenant, name string) (string, error) {
	var row TenantSecret
	err := l.scope(ctx).Where("tenant = ? AND name = ?", tenant, name).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", errorf(CodeNotFound, "tenant %q has no secret %q", tenant, name)
	}
	if err != nil {
		return "", unavailable("read tenant secret", err)
	}
	if l.data == nil {
		return "", errorf(CodeInvalid, "tenant secrets are sealed under IDEMGATE_DATA_KEY, which is not set")
	}
	plain, err := l.data.Open(row.Sealed, secretAAD(tenant, name))
	if err != nil {
		return "", errorf(CodeInvalid, "tenant %q: secret %q cannot be opened with the data keys", tenant, name)
	}
	return string(plain), nil
}

// MissingTenantSecrets returns which of names the tenant has not set, in their order.
func (l *Ledger) MissingTenantSecrets(ctx context.Context, tenant string, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var have []string
	if err := l.scope(ctx).Model(&TenantSecret{}).Where("tenant = ? AND name IN ?", tenant, names).Pluck("name", &have).Error; err != nil {
		return nil, unavailable("look up tenant secrets", err)
	}
	var missing []string
	for _, n := range names {
		found := false
		for _, h := range have {
			found = found || h == n
		}
		if !found {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

// resealTenantSecrets seals anew under the current data key every tenant secret an older key
// sealed (RotateDataKeys), each only if it still holds what was read.
func (l *Ledger) resealTenantSecrets(ctx context.Context) (int, error) {
	var rows []TenantSecret
	if err := l.scope(ctx).Find(&rows).Error; err != nil {
		return 0, unavailable("read tenant secrets to rotate", err)
	}
	n := 0
	for _, row := range rows {
		if l.data.Current(row.Sealed) {
			continue
		}
		aad := secretAAD(row.Tenant, row.Name)
		plain, err := l.data.Open(row.Sealed, aad)
		if err != nil {
			return n, fmt.Errorf("ledger: rotate the secret %q of tenant %q: %w", row.Name, row.Tenant, err)
		}
		res := l.scope(ctx).Model(&TenantSecret{}).Where("tenant = ? AND name = ? AND sealed = ?", row.Tenant, row.Name, row.Sealed).
			Update("sealed", l.data.Seal(plain, aad))
		if res.Error != nil {
			return n, unavailable("reseal a tenant secret", res.Error)
		}
		n += int(res.RowsAffected)
	}
	return n, nil
}
