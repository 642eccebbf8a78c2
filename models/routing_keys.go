package models

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// A PagerDuty subscription needs a routing key, and the publisher posts it to the subscription's
// URL, which whoever configured the subscription chose. So the key must never be something the
// gateway reads on that person's behalf: a reference such as file:/proc/self/environ or
// tenant:stripe_key would make the gateway hand its own secrets to a URL of their choosing.
//
// Two ways in, then:
//   - a value, typed in the console or given to `idemgate webhook create --routing-key`: sealed
//     under the data key (bound to the subscription), never shown again but for its last four
//     characters;
//   - a reference (env:NAME, file:PATH, tenant:NAME), only from the command line run by an
//     operator on the host (`--routing-key-ref`), and only to what the operator set aside for
//     notifications (SecretRefPolicy). The publisher checks the reference against the same policy
//     every time it reads one, so a reference stored by an earlier release, from anywhere, reads
//     nothing the operator did not set aside.

// SecretRefPolicy is what the operator sets aside for notifications' secret references
// (docs/WEBHOOKS.md): environment variables under EnvPrefix, files under FileDir, and the tenant
// secrets named in TenantSecrets. A zero part allows nothing of its kind.
type SecretRefPolicy struct {
	EnvPrefix     string
	FileDir       string
	TenantSecrets []string
}

// DefaultNotifyEnvPrefix is the environment prefix env: references may name when the operator
// chose none.
const DefaultNotifyEnvPrefix = "IDEMGATE_WEBHOOK_"

// SecretRefPolicyFromEnv reads the operator's policy: IDEMGATE_NOTIFY_ENV_PREFIX (default
// DefaultNotifyEnvPrefix), IDEMGATE_NOTIFY_FILE_DIR and IDEMGATE_NOTIFY_TENANT_SECRETS
// (comma-separated names).
func SecretRefPolicyFromEnv(getenv func(string) string) SecretRefPolicy {
	p := SecretRefPolicy{EnvPrefix: DefaultNotifyEnvPrefix, FileDir: strings.TrimSpace(getenv("IDEMGATE_NOTIFY_FILE_DIR"))}
	if v := strings.TrimSpace(getenv("IDEMGATE_NOTIFY_ENV_PREFIX")); v != "" {
		p.EnvPrefix = v
	}
	for _, n := range strings.Split(getenv("IDEMGATE_NOTIFY_TENANT_SECRETS"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			p.TenantSecrets = append(p.TenantSecrets, n)
		}
	}
	return p
}

// Check parses ref (ParseSecretRef) and says whether the policy allows it. A file is allowed
// only when its path, symbolic links resolved, lies under FileDir (resolved too): a link or
// "../" out of the directory is refused.
func (p SecretRefPolicy) Check(ref string) (kind, name string, err error) {
	kind, name, err = ParseSecretRef(ref)
	if err != nil {
		return "", "", err
	}
	switch kind {
	case "env":
		// A prefix too short to mean anything ("", "I") would set aside the whole environment.
		if len(p.EnvPrefix) < 4 || !strings.HasPrefix(name, p.EnvPrefix) || len(name) == len(p.EnvPrefix) {
			return "", "", errorf(CodeInvalid, "env:%s is not set aside for notifications: name a variable under %s (IDEMGATE_NOTIFY_ENV_PREFIX)", name, p.EnvPrefix)
		}
	case "file":
		if p.FileDir == "" {
			return "", "", errorf(CodeInvalid, "file:%s is not set aside for notifications: the operator has named no directory for them (IDEMGATE_NOTIFY_FILE_DIR)", name)
		}
		if !underDir(p.FileDir, name) {
			return "", "", errorf(CodeInvalid, "file:%s is not set aside for notifications: it is not under %s (IDEMGATE_NOTIFY_FILE_DIR)", name, p.FileDir)
		}
	case "tenant":
		if !slices.Contains(p.TenantSecrets, name) {
			return "", "", errorf(CodeInvalid, "tenant secret %q is not set aside for notifications (IDEMGATE_NOTIFY_TENANT_SECRETS)", name)
		}
	}
	return kind, name, nil
}

// underDir reports whether path, with symbolic links resolved, lies strictly inside dir (also
// resolved). A path that does not exist yet is judged as written, made absolute and clean.
func underDir(dir, path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	resolve := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	d, f := resolve(dir), resolve(path)
	rel, err := filepath.Rel(d, f)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel)
}

// routingKeyAAD binds a sealed routing key to its subscription: copied to another row it opens
// nothing.
func routingKeyAAD(subscriptionID string) []byte {
	return []byte("routing-key\x00" + subscriptionID)
}

// maxRoutingKeyLen bounds a routing key's value (PagerDuty's are 32 characters).
const maxRoutingKeyLen = 256

// RoutingKeyHint is how a sealed routing key is shown: its last four characters.
func RoutingKeyHint(value string) string {
	r := []rune(value)
	if len(r) <= 4 {
		return "••••"
	}
	return "•••• " + string(r[len(r)-4:])
}

// sealRoutingKey checks and seals a routing key's value for subscription id.
func (l *Ledger) sealRoutingKey(id, value string) (sealed, hint string, err error) {
	switch {
	case l.data == nil:
		return "", "", errorf(CodeInvalid, "IDEMGATE_DATA_KEY is not set: a routing key is sealed under it and never stored in clear")
	case len(value) > maxRoutingKeyLen:
		return "", "", errorf(CodeInvalid, "the routing key is longer than %d characters", maxRoutingKeyLen)
	case strings.ContainsAny(value, " \t\r\n"):
		return "", "", errorf(CodeInvalid, "the routing key holds white space")
	}
	if _, _, err := ParseSecretRef(value); err == nil {
		// Typed where a value belongs, a reference would be sent as the key: say so instead.
		return "", "", errorf(CodeInvalid, "type the routing key itself: a reference (%s) is read only when an operator gives it with `idemgate webhook create --routing-key`", value)
	}
	return l.data.Seal([]byte(value), routingKeyAAD(id)), RoutingKeyHint(value), nil
}

// openRoutingKey opens a subscription's sealed routing key for the publisher.
func (l *Ledger) openRoutingKey(id, sealed string) (string, error) {
	if l.data == nil {
		return "", fmt.Errorf("the routing key is sealed under IDEMGATE_DATA_KEY, which is not set")
	}
	plain, err := l.data.Open(sealed, routingKeyAAD(id))
	if err != nil {
		return "", fmt.Errorf("the routing key cannot be opened with the data keys")
	}
	return string(plain), nil
}

// resealRoutingKeys seals anew under the current data key every routing key an older key sealed
// (RotateDataKeys), each only if it still holds what was read.
func (l *Ledger) resealRoutingKeys(ctx context.Context) (int, error) {
	var rows []WebhookSubscription
	if err := l.scope(ctx).Select("id, routing_key_sealed").Where("routing_key_sealed IS NOT NULL").Find(&rows).Error; err != nil {
		return 0, unavailable("read routing keys to rotate", err)
	}
	n := 0
	for _, row := range rows {
		if l.data.Current(*row.RoutingKeySealed) {
			continue
		}
		plain, err := l.data.Open(*row.RoutingKeySealed, routingKeyAAD(row.ID))
		if err != nil {
			return n, fmt.Errorf("ledger: rotate the routing key of webhook %s: %w", row.ID, err)
		}
		res := l.scope(ctx).Model(&WebhookSubscription{}).Where("id = ? AND routing_key_sealed = ?", row.ID, *row.RoutingKeySealed).
			Update("routing_key_sealed", l.data.Seal(plain, routingKeyAAD(row.ID)))
		if res.Error != nil {
			return n, unavailable("reseal a routing key", res.Error)
		}
		n += int(res.RowsAffected)
	}
	return n, nil
}
