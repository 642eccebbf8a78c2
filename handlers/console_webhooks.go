package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// The webhooks admin page (admins only; the routes check the role): subscriptions within the
// admin's scope, created and deleted here, and their deliveries with every attempt. Changes
// answer with a redirect back to the page (post/redirect/get); a new subscription's secret
// travels only in the session's flash, shown once.

// Webhooks shows the subscriptions and the deliveries, filtered by status, tenant and operation.
func (h *Console) Webhooks(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenants, err := h.Ledger.ScopedTenants(ctx, v.Scope)
	if err != nil {
		return err
	}
	subs, err := h.Ledger.Webhooks(ctx, v.Scope, "")
	if err != nil {
		return err
	}
	f := models.DeliveryFilter{Status: c.QueryParam("status"), Tenant: c.QueryParam("tenant"),
		OperationID: strings.TrimSpace(c.QueryParam("operation"))}
	rows, err := h.Ledger.WebhookDeliveries(ctx, v.Scope, f)
	if err != nil {
		return err
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	attempts, err := h.Ledger.WebhookAttempts(ctx, ids)
	if err != nil {
		return err
	}
	now := h.now()
	names := tenantNames(tenants)
	p := views.WebhooksPage{Page: h.page(c, v, "Webhooks", views.NavAdmin), TenantOptions: options(names, ""), MayAllowPrivate: v.Scope.Unlimited(),
		EventTypes: models.WebhookEventTypes, Formats: options(models.WebhookFormats, models.WebhookFormatStandard),
		TenantFilter: options(names, f.Tenant), Operation: f.OperationID,
		StatusOptions: options([]string{models.DeliveryPending, models.DeliveryDelivered, models.DeliveryDead}, f.Status)}
	if fl, ok := h.takeFlash(c); ok {
		p.Notice = &views.NoticeText{Kind: views.NoticeKind(fl.Kind), Message: fl.Message}
		if fl.Secret != "" {
			p.NewSecret = &views.NewWebhookSecret{Title: fl.Message, Secret: fl.Secret}
			p.Notice = nil
		}
	}
	for _, s := range subs {
		row := views.WebhookRow{ID: s.ID, Tenant: s.Tenant, URL: s.URL, Events: s.Events, Format: s.Format,
			AllowPrivate: s.AllowPrivate, Created: views.NewTime(s.CreatedAt, now)}
		switch {
		case s.RoutingKeyHint != nil:
			row.RoutingKey = *s.RoutingKeyHint
		case s.RoutingKey != nil:
			row.RoutingKey = "read from " + *s.RoutingKey
		}
		p.Subscriptions = append(p.Subscriptions, row)
	}
	for _, r := range rows {
		d := deliveryView(r, attempts[r.ID], now)
		if d.Status == models.DeliveryDead {
			p.Dead++
		}
		p.Deliveries = append(p.Deliveries, d)
	}
	return renderPage(c, http.StatusOK, views.Webhooks(p))
}

// deliveryView is a delivery as the page shows it.
func deliveryView(r models.DeliveryRow, attempts []models.WebhookAttempt, now time.Time) views.DeliveryView {
	d := views.DeliveryView{ID: r.ID, WebhookID: r.OutboxID, EventType: r.EventType, Tenant: r.Tenant,
		OperationID: r.OperationID, OperationHref: OperationHref(r.OperationID), URL: r.URL, Status: r.Status,
		Attempts: r.Attempts, LastError: deref(r.LastError), Created: views.NewTime(r.CreatedAt, now),
		Delivered: timePtr(r.DeliveredAt, now)}
	inFlight := r.LeaseExpiresAt != nil && r.LeaseExpiresAt.After(now)
	if r.Status == models.DeliveryPending {
		d.NextAttempt = timePtr(&r.NextAttemptAt, time.Time{})
	}
	d.Redeliverable = r.SubDeletedAt == nil && !inFlight
	for _, a := range attempts {
		status := "no answer"
		if a.StatusCode != nil {
			status = strconv.Itoa(*a.StatusCode)
		}
		d.History = append(d.History, views.DeliveryAttemptView{At: views.NewTime(a.At, now), Status: status,
			Latency: strconv.FormatInt(a.LatencyMS, 10) + " ms", Error: deref(a.Error)})
	}
	return d
}

// CreateWebhook subscribes a URL to a tenant's events; the secret is shown once, on the page
// the redirect leads to.
func (h *Console) CreateWebhook(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	in := models.NewWebhook{Tenant: c.FormValue("tenant"), URL: c.FormValue("url"), Events: form["events"],
		AllowPrivate: c.FormValue("allow_private") == "1", Format: c.FormValue("format"), RoutingKey: strings.TrimSpace(c.FormValue("routing_key"))}
	w, err := h.Ledger.CreateWebhook(c.Request().Context(), v.Scope, requester(c, v), in)
	if err != nil {
		return h.webhooksDone(c, err, "", "#subscriptions")
	}
	sub := w.Subscription
	h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeSuccess), Secret: w.Secret,
		Message: "Webhook " + sub.ID + " of " + sub.Tenant + " created: deliveries to " + sub.URL + " are signed with this secret."})
	return c.Redirect(http.StatusSeeOther, "/admin/webhooks#subscriptions")
}

// TestWebhook queues a test event for one subscription within the admin's scope.
func (h *Console) TestWebhook(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	msg, err := h.Ledger.SendTestEvent(c.Request().Context(), v.Scope, requester(c, v), c.Param("id"))
	if models.ErrorCode(err) == models.CodeNotFound {
		return err
	}
	return h.webhooksDone(c, err, "Test event "+msg+" queued for "+c.Param("id")+": its delivery is listed below once sent.", "#deliveries")
}

// DeleteWebhook ends a subscription within the admin's scope.
func (h *Console) DeleteWebhook(c echo.Context) error {
	return removeByID(h, c, "/admin/webhooks#subscriptions", h.Ledger.DeleteWebhook, func(s *models.WebhookSubscription) string {
		return "Webhook " + s.ID + " of " + s.Tenant + " deleted; its pending deliveries will not be sent."
	})
}

// Redeliver queues a delivery again, with the same webhook-id.
func (h *Console) Redeliver(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	d, err := h.Ledger.Redeliver(c.Request().Context(), v.Scope, requester(c, v), c.Param("id"))
	if models.ErrorCode(err) == models.CodeNotFound {
		return err
	}
	msg := ""
	if d != nil {
		msg = "Delivery " + d.ID + " queued again; it goes out shortly with the same webhook-id."
	}
	return h.webhooksDone(c, err, msg, "#deliveries")
}

// requester is the signed-in admin and the request, for the audit entry.
func requester(c echo.Context, v *Viewer) models.Requester {
	return v.Requester(c)
}

// webhooksDone redirects back to the webhooks page with the outcome (see formDone).
func (h *Console) webhooksDone(c echo.Context, err error, success, anchor string) error {
	return h.formDone(c, err, success, "/admin/webhooks"+anchor)
}
