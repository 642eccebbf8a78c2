package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/idemgate/idemgate/models"
)

const webhookUsage = "usage: idemgate webhook create --tenant T --url U --events a,b [--format F] [--routing-key REF | --routing-key-stdin] [--allow-private] | list [--tenant T] | test ID | delete ID"

// webhook runs `idemgate webhook create|list|test|delete` (docs/CLI.md).
func (env *environment) webhook(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", webhookUsage)
	}
	switch args[0] {
	case "create":
		return env.webhookCreate(ctx, args[1:])
	case "list":
		return env.webhookList(ctx, args[1:])
	case "test":
		if len(args) != 2 {
			return fmt.Errorf("usage: idemgate webhook test ID")
		}
		return env.webhookTest(ctx, args[1])
	case "delete":
		if len(args) != 2 {
			return fmt.Errorf("usage: idemgate webhook delete ID")
		}
		return env.webhookDelete(ctx, args[1])
	}
	return fmt.Errorf("unknown webhook command %q; %s", args[0], webhookUsage)
}

func (env *environment) webhookCreate(ctx context.Context, args []string) error {
	fs := newFlagSet("webhook create", env.stderr)
	tenant := fs.String("tenant", "", "tenant whose events are sent (required)")
	url := fs.String("url", "", "http or https URL that receives them (required)")
	events := fs.String("events", "", "comma-separated event types: "+strings.Join(models.WebhookEventTypes, ", ")+" (required)")
	allowPrivate := fs.Bool("allow-private", false, "allow a target on loopback or private addresses")
	format := fs.String("format", models.WebhookFormatStandard, "body format: "+strings.Join(models.WebhookFormats, ", "))
	routingKeyRef := fs.String("routing-key", "",
		"pagerduty: where the publisher reads the routing key, env:NAME, file:PATH or tenant:NAME, within what the operator set aside (docs/WEBHOOKS.md)")
	routingKeyStdin := fs.Bool("routing-key-stdin", false, "pagerduty: the routing key itself, on the first line of standard input (sealed under IDEMGATE_DATA_KEY)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tenant == "" || *url == "" || *events == "" || fs.NArg() > 0 || (*routingKeyRef != "" && *routingKeyStdin) {
		return fmt.Errorf("usage: idemgate webhook create --tenant T --url U --events a,b [--format F] [--routing-key REF | --routing-key-stdin] [--allow-private]")
	}
	in := models.NewWebhook{Tenant: *tenant, URL: *url, Events: strings.Split(*events, ","), AllowPrivate: *allowPrivate,
		Format: *format, RoutingKeyRef: *routingKeyRef, RefPolicy: models.SecretRefPolicyFromEnv(env.getenv)}
	var open func(context.Context) (*models.Ledger, func(), error) = env.openLedger
	if *routingKeyStdin {
		line, err := bufio.NewReader(env.stdin).ReadString('\n')
		if in.RoutingKey = strings.TrimRight(line, "\r\n"); err != nil && in.RoutingKey == "" {
			return errors.New("no routing key on standard input: give it as the first line")
		}
		open = env.openSealedLedger
	}
	l, closeDB, err := open(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	w, err := l.CreateWebhook(ctx, models.AllTenants(), cli, in)
	if err != nil {
		return err
	}
	s := w.Subscription
	fmt.Fprintf(env.stdout, "webhook %s created for tenant %s\n  url:    %s\n  events: %s\n", s.ID, s.Tenant, s.URL, s.Events)
	if s.RoutingKeyHint != nil {
		fmt.Fprintf(env.stdout, "  routing key: %s (sealed)\n", *s.RoutingKeyHint)
	} else if s.RoutingKey != nil {
		fmt.Fprintf(env.stdout, "  routing key: read from %s\n", *s.RoutingKey)
	}
	fmt.Fprintf(env.stdout, "signing secret, shown once:\n%s\n", w.Secret)
	return nil
}

func (env *environment) webhookList(ctx context.Context, args []string) error {
	fs := newFlagSet("webhook list", env.stderr)
	tenant := fs.String("tenant", "", "only this tenant's subscriptions")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("usage: idemgate webhook list [--tenant T]")
	}
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	subs, err := l.Webhooks(ctx, models.AllTenants(), *tenant)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTENANT\tURL\tEVENTS\tFORMAT\tPRIVATE\tCREATED")
	for _, s := range subs {
		private := "no"
		if s.AllowPrivate {
			private = "allowed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Tenant, s.URL, s.Events, s.Format, private, s.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return tw.Flush()
}

func (env *environment) webhookDelete(ctx context.Context, id string) error {
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	s, err := l.DeleteWebhook(ctx, models.AllTenants(), cli, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "webhook %s of tenant %s deleted; its pending deliveries will not be sent\n", s.ID, s.Tenant)
	return nil
}

// webhookTest queues a test event for one subscription: the publisher (of serve or worker)
// sends it, and `webhook list` and the console's deliveries show how the receiver answered.
func (env *environment) webhookTest(ctx context.Context, id string) error {
	l, closeDB, err := env.openLedger(ctx)
	if err != nil {
		return err
	}
	defer closeDB()
	msg, err := l.SendTestEvent(ctx, models.AllTenants(), cli, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "test event %s queued for webhook %s; a running serve or worker sends it\n", msg, id)
	return nil
}
