package models

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// Requester is who asks for an admin change, for its audit entry.
type Requester struct {
	Actor string // cli, or user:<email>
	// UserID is the console user's stable id (none for the command line): who they are,
	// whatever their email is now (Person).
	UserID    string
	RequestID string
}

// NewWebhook is a subscription an admin asks for.
type NewWebhook struct {
	Tenant       string
	URL          string
	Events       []string
	AllowPrivate bool // the URL may point at loopback or private addresses
	// Format is the body's format ("" for standard). A PagerDuty subscription's routing key is
	// RoutingKey, a value (sealed, never shown again), or RoutingKeyRef, a secret reference that
	// only the command line may give (Actor ActorCLI), checked against RefPolicy.
	Format        string
	RoutingKey    string
	RoutingKeyRef string
	RefPolicy     SecretRefPolicy
	// Resolver checks where the URL's host points; nil is the system resolver.
	Resolver AddrResolver
}

// CreatedWebhook is a new subscription with its signing secret, shown this once.
type CreatedWebhook struct {
	Subscription WebhookSubscription // Secret left empty
	Secret       string
}

// webhookSecretPrefix starts every signing secret (Standard Webhooks).
const webhookSecretPrefix = "whsec_"

// newWebhookSecret returns "whsec_" + base64 of 32 random bytes.
func newWebhookSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("ledger: generate webhook secret: %w", err)
	}
	return webhookSecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// WebhookKey returns the HMAC key of a signing secret: the bytes after "whsec_", base64-decoded.
func WebhookKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, webhookSecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("webhook secret: %w", err)
	}
	return key, nil
}

// normaliseEvents checks a list of event types and returns it deduplicated, in the order of
// WebhookEventTypes.
func normaliseEvents(events []string) ([]string, error) {
	want := map[string]bool{}
	for _, e := range events {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		if !slices.Contains(WebhookEventTypes, e) {
			return nil, errorf(CodeInvalid, "unknown event type %q; known: %s", e, strings.Join(WebhookEventTypes, ", "))
		}
		want[e] = true
	}
	var out []string
	for _, e := range WebhookEventTypes {
		if want[e] {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, errorf(CodeInvalid, "name at least one event type: %s", strings.Join(WebhookEventTypes, ", "))
	}
	return out, nil
}

// CreateWebhook subscribes a URL to a tenant's events, within scope s. The URL must be http or
// https and, unless in.AllowPrivate, resolve only to public addresses; unknown event types are
// refused. Only the unlimited scope (an admin of every tenant, the command line) may allow
// private targets: a target inside the network is the operator's business, not a tenant's, so
// a tenant admin's request is checked as if it had not asked. The subscription and its audit
// entry commit together.
func (l *Ledger) CreateWebhook(ctx context.Context, s Scope, by Requester, in NewWebhook) (*CreatedWebhook, error) {
	if !s.Allows(in.Tenant) {
		return nil, errorf(CodeNotFound, "tenant %q does not exist", in.Tenant)
	}
	if !s.Unlimited() {
		in.AllowPrivate = false
	}
	events, err := normaliseEvents(in.Events)
	if err != nil {
		return nil, err
	}
	if in.RoutingKey != "" && in.RoutingKeyRef != "" {
		return nil, errorf(CodeInvalid, "give the routing key or a reference to it, not both")
	}
	if in.RoutingKeyRef != "" {
		// Only an operator on the host names where a secret is: a person configuring a
		// notification types the key itself.
		if by.Actor != ActorCLI {
			return nil, errorf(CodeInvalid, "a routing key reference is for the command line only: type the routing key itself")
		}
		if _, _, err := in.RefPolicy.Check(in.RoutingKeyRef); err != nil {
			return nil, err
		}
	}
	format, err := checkFormat(in.Format, events, in.RoutingKey != "" || in.RoutingKeyRef != "")
	if err != nil {
		return nil, err
	}
	u, err := CheckWebhookURL(ctx, in.Resolver, in.URL, in.AllowPrivate)
	if err != nil {
		return nil, err
	}
	secret, err := newWebhookSecret()
	if err != nil {
		return nil, err
	}
	now := l.clock()
	sub := WebhookSubscription{ID: newID("whk"), Tenant: in.Tenant, URL: u.String(), Events: strings.Join(events, ","),
		Secret: secret, AllowPrivate: in.AllowPrivate, Format: format, CreatedAt: now}
	routingKey := "" // what the audit entry says of it: never the value
	switch {
	case in.RoutingKeyRef != "":
		sub.RoutingKey, routingKey = &in.RoutingKeyRef, in.RoutingKeyRef
	case in.RoutingKey != "":
		sealed, hint, err := l.sealRoutingKey(sub.ID, in.RoutingKey)
		if err != nil {
			return nil, err
		}
		sub.RoutingKeySealed, sub.RoutingKeyHint, routingKey = &sealed, &hint, "a value ending "+hint
	}
	err = l.txn(ctx, "create webhook", func(tx *gorm.DB) ([]string, error) {
		if err := tx.Where("name = ?", in.Tenant).Take(&Tenant{}).Error; err != nil {
			if notFound(err) {
				return nil, errorf(CodeNotFound, "tenant %q does not exist", in.Tenant)
			}
			return nil, err
		}
		if err := tx.Create(&sub).Error; err != nil {
			return nil, err
		}
		detail := map[string]any{"webhook_id": sub.ID, "url": AuditedURL(sub.URL), "events": sub.Events, "allow_private": sub.AllowPrivate, "format": sub.Format}
		if routingKey != "" {
			detail["routing_key"] = routingKey
		}
		_, err := l.appendAudit(tx, now, AuditInput{Actor: by.Actor, Action: "webhook.create", Tenant: sub.Tenant, Outcome: "ok",
			RequestID: by.RequestID, Detail: detail})
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	sub.Secret, sub.RoutingKeySealed = "", nil
	return &CreatedWebhook{Subscription: sub, Secret: secret}, nil
}

// AuditedURL is a subscription's URL as the audit log keeps it: scheme and host, then the last
// four characters of the rest. A Slack or Teams incoming webhook URL is itself the credential
// (whoever holds it may post to the channel), and auditors, exports and signed histories must
// not carry it; many other receivers put a token in the path or query too.
func AuditedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "…"
	}
	rest := strings.TrimPrefix(raw, u.Scheme+"://"+u.Host)
	if r := []rune(rest); len(r) > 8 {
		rest = "/…" + string(r[len(r)-4:])
	} else if rest != "" && rest != "/" {
		rest = "/…"
	}
	return u.Scheme + "://" + u.Host + rest
}

// webhookColumns are the columns lists read: never the secret, never the sealed routing key.
const webhookColumns = "id, tenant, url, events, allow_private, format, routing_key, routing_key_hint, created_at, deleted_at"

// Webhooks lists the live subscriptions within scope s, of tenant when it is not "", by tenant
// and age. Their secrets are not read.
func (l *Ledger) Webhooks(ctx context.Context, s Scope, tenant string) ([]WebhookSubscription, error) {
	q := s.apply(l.scope(ctx).Select(webhookColumns), "tenant").Where("deleted_at IS NULL")
	if tenant != "" {
		q = q.Where("tenant = ?", tenant)
	}
	var out []WebhookSubscription
	if err := q.Order("tenant, id").Find(&out).Error; err != nil {
		return nil, unavailable("list webhooks", err)
	}
	return out, nil
}

// DeleteWebhook ends a subscription within scope s. Its pending deliveries end dead at once, and
// the publisher never sends to a deleted subscription: one it claimed before the deletion
// committed cannot record a success over the deletion.
func (l *Ledger) DeleteWebhook(ctx context.Context, s Scope, by Requester, id string) (*WebhookSubscription, error) {
	var sub WebhookSubscription
	now := l.clock()
	err := l.txn(ctx, "delete webhook "+id, func(tx *gorm.DB) ([]string, error) {
		err := s.apply(tx.Select(webhookColumns), "tenant").Where("id = ? AND deleted_at IS NULL", id).Take(&sub).Error
		if notFound(err) {
			return nil, errorf(CodeNotFound, "no live webhook %q", id)
		}
		if err != nil {
			return nil, err
		}
		res := tx.Model(&WebhookSubscription{}).Where("id = ? AND deleted_at IS NULL", id).Update("deleted_at", now)
		if res.Error != nil {
			return nil, res.Error
		}
		if res.RowsAffected != 1 {
			return nil, errorf(CodeNotFound, "no live webhook %q", id)
		}
		sub.DeletedAt = &now
		err = tx.Model(&WebhookDelivery{}).Where("subscription_id = ? AND status = ?", id, DeliveryPending).
			Updates(map[string]any{"status": DeliveryDead, "last_error": "the subscription was deleted", "lease_owner": nil, "lease_expires_at": nil}).Error
		if err != nil {
			return nil, err
		}
		_, err = l.appendAudit(tx, now, AuditInput{Actor: by.Actor, Action: "webhook.delete", Tenant: sub.Tenant, Outcome: "ok",
			RequestID: by.RequestID, Detail: map[string]any{"webhook_id": sub.ID, "url": AuditedURL(sub.URL)}})
		return nil, err
	})
	if err != nil {
		return nil, err
	}
	return &sub, nil
}
