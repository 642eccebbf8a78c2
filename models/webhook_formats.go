package models

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// The body formats of a subscription (docs/WEBHOOKS.md). The outbox keeps the standard body;
// the publisher writes the others from it when it sends.
const (
	WebhookFormatStandard  = "standard"
	WebhookFormatSlack     = "slack"     // Block Kit, for Slack and Mattermost incoming webhooks
	WebhookFormatTeams     = "teams"     // an Adaptive Card in a message attachment
	WebhookFormatPagerDuty = "pagerduty" // Events API v2
)

// WebhookFormats lists them.
var WebhookFormats = []string{WebhookFormatStandard, WebhookFormatSlack, WebhookFormatTeams, WebhookFormatPagerDuty}

// pagerDutyEvents are the events a PagerDuty subscription may take: what opens an incident
// (a review opened, an operation UNKNOWN, an approval about to lapse) and what resolves it.
var pagerDutyEvents = []string{WebhookOperationUnknown, WebhookReviewOpened, WebhookReviewExpiring, WebhookReviewResolved}

// WebhookTest is the event type of a test event, sent to one subscription on request.
const WebhookTest = "webhook.test"

// checkFormat checks a subscription's format, its events and whether it has a routing key:
// required for PagerDuty, refused otherwise.
func checkFormat(format string, events []string, hasRoutingKey bool) (string, error) {
	if format == "" {
		format = WebhookFormatStandard
	}
	if !slices.Contains(WebhookFormats, format) {
		return "", errorf(CodeInvalid, "unknown format %q; known: %s", format, strings.Join(WebhookFormats, ", "))
	}
	if format != WebhookFormatPagerDuty {
		if hasRoutingKey {
			return "", errorf(CodeInvalid, "a routing key is for the pagerduty format only")
		}
		return format, nil
	}
	if !hasRoutingKey {
		return "", errorf(CodeInvalid, "the pagerduty format needs its routing key")
	}
	for _, e := range events {
		if !slices.Contains(pagerDutyEvents, e) {
			return "", errorf(CodeInvalid, "the pagerduty format takes %s, not %s: an incident is opened when a person is needed and resolved when they have decided",
				strings.Join(pagerDutyEvents, ", "), e)
		}
	}
	return format, nil
}

// ParseSecretRef reads a secret reference as an operator writes it on the command line:
// "env:NAME" (the publishing process's environment), "file:PATH" (read when used) or
// "tenant:NAME" (the subscription's tenant's secret). What it may name is SecretRefPolicy's.
func ParseSecretRef(ref string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(ref, ":")
	if !ok || name == "" || (kind != "env" && kind != "file" && kind != "tenant") {
		return "", "", errorf(CodeInvalid, "a routing key reference is env:NAME, file:PATH or tenant:NAME")
	}
	return kind, name, nil
}

// SendTestEvent queues a test event (webhook.test) for subscription id of scope s only: a body
// in its format that says it is a test, delivered as any other message (signed, retried), so
// an admin sees in the deliveries whether the receiver takes it.
func (l *Ledger) SendTestEvent(ctx context.Context, s Scope, by Requester, id string) (string, error) {
	now := l.clock()
	var msgID string
	err := l.txn(ctx, "webhook test "+id, func(tx *gorm.DB) ([]string, error) {
		var sub WebhookSubscription
		err := s.apply(tx.Where("id = ? AND deleted_at IS NULL", id), "tenant").Take(&sub).Error
		if notFound(err) {
			return nil, errorf(CodeNotFound, "webhook %q not found", id)
		}
		if err != nil {
			return nil, err
		}
		body := webhookPayload{Type: WebhookTest, OccurredAt: now.UTC(), Tenant: sub.Tenant,
			Summary: "A test event from idemgate: this subscription reaches its receiver.", Data: webhookData{}}
		if l.publicURL != "" {
			body.Links = &webhookLinks{Console: l.publicURL + "/admin/webhooks"}
		}
		payload, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		msg := OutboxMessage{ID: newID("msg"), Tenant: sub.Tenant, EventType: WebhookTest, OccurredAt: now, Payload: string(payload), CreatedAt: now}
		if err := tx.Create(&msg).Error; err != nil {
			return nil, err
		}
		msgID = msg.ID
		if err := tx.Create(&WebhookDelivery{ID: newID("dlv"), OutboxID: msg.ID, SubscriptionID: sub.ID, Status: DeliveryPending,
			NextAttemptAt: now, CreatedAt: now}).Error; err != nil {
			return nil, err
		}
		_, err = l.appendAudit(tx, now, AuditInput{Actor: by.Actor, Action: "webhook.test", Tenant: sub.Tenant, Outcome: "ok",
			RequestID: by.RequestID, Detail: map[string]any{"webhook_id": sub.ID, "message_id": msg.ID}})
		return nil, err
	})
	return msgID, err
}
